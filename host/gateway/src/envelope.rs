//! The part of a chat-completions request the gateway itself reads. The body is
//! parsed once, borrowing from the request bytes; every other field stays in the
//! original bytes and reaches the adapter untouched.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use tollgate_routing::affinity::KeySource;

use tollgate_web::error::ApiError;

#[derive(Debug)]
pub struct ChatEnvelope<'a> {
    pub model: Cow<'a, str>,
    pub stream: bool,
    pub messages: usize,
    /// `max_completion_tokens`, else `max_tokens`, if the caller set one.
    pub max_output_tokens: Option<u64>,
    /// Candidates after `model`, from `models` (or its alias `fallbacks`).
    pub fallbacks: Vec<Cow<'a, str>>,
    /// Whether a stream may continue on the next candidate after content was
    /// sent (`"continuation": false` turns it off).
    pub continuation: bool,
    /// The `provider` preferences object as written; routing reads it.
    pub provider: Option<&'a RawValue>,
    /// What names the conversation, when the caller says: `session_id`,
    /// else `user` (strings only).
    pub session: Option<(KeySource, &'a str)>,
}

/// Most candidates a request may list, `model` included.
pub const MAX_CANDIDATES: usize = 8;

#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    messages: Option<Vec<RawMessage<'a>>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(borrow, default)]
    models: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow, default)]
    fallbacks: Option<Vec<Cow<'a, str>>>,
    #[serde(default)]
    continuation: Option<bool>,
    #[serde(borrow, default)]
    provider: Option<&'a RawValue>,
    #[serde(borrow, default)]
    session_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    user: Option<&'a RawValue>,
}

/// A message, read for its role only. Written by hand because serde's derive
/// also reads a struct from a JSON array, and `["user"]` is not a message.
struct RawMessage<'a> {
    role: Option<Cow<'a, str>>,
}

/// A string borrowed from the body unless it has escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for RawMessage<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MessageVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for MessageVisitor<'a> {
            type Value = RawMessage<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut role: Option<Option<Text<'a>>> = None;
                while let Some(Text(key)) = map.next_key::<Text<'a>>()? {
                    if key != "role" {
                        map.next_value::<IgnoredAny>()?;
                    } else if role.is_some() {
                        return Err(de::Error::duplicate_field("role"));
                    } else {
                        role = Some(map.next_value()?);
                    }
                }
                Ok(RawMessage {
                    role: role.flatten().map(|Text(role)| role),
                })
            }
        }
        deserializer.deserialize_map(MessageVisitor(PhantomData))
    }
}

impl<'a> ChatEnvelope<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Self, ApiError> {
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        if first != Some(&b'{') {
            return Err(ApiError::invalid_request("The request body must be a JSON object."));
        }
        let raw: Raw<'a> = serde_json::from_slice(body).map_err(|e| {
            ApiError::invalid_request(format!("The request body is not valid JSON for a chat completion: {e}"))
        })?;
        let model = raw
            .model
            .filter(|m| !m.is_empty())
            .ok_or_else(|| ApiError::invalid_request("'model' is required.").with_param("model"))?;
        let messages = raw
            .messages
            .ok_or_else(|| ApiError::invalid_request("'messages' is required.").with_param("messages"))?;
        if messages.is_empty() {
            return Err(
                ApiError::invalid_request("'messages' must contain at least one message.").with_param("messages"),
            );
        }
        if messages.iter().any(|m| m.role.as_deref().is_none_or(str::is_empty)) {
            return Err(ApiError::invalid_request("Every message needs a 'role'.").with_param("messages"));
        }
        let max_output_tokens = raw.max_completion_tokens.or(raw.max_tokens);
        if max_output_tokens == Some(0) {
            return Err(
                ApiError::invalid_request("The output-token limit must be at least 1.").with_param("max_tokens")
            );
        }
        if raw.models.is_some() && raw.fallbacks.is_some() {
            return Err(
                ApiError::invalid_request("Send either 'models' or 'fallbacks', not both.").with_param("models"),
            );
        }
        let fallbacks = raw.models.or(raw.fallbacks).unwrap_or_default();
        if fallbacks.len() + 1 > MAX_CANDIDATES {
            let message = format!("At most {} fallback models may follow 'model'.", MAX_CANDIDATES - 1);
            return Err(ApiError::invalid_request(message).with_param("models"));
        }
        if fallbacks.iter().any(|m| m.is_empty()) {
            return Err(ApiError::invalid_request("Fallback model names must not be empty.").with_param("models"));
        }
        // A JSON string without escapes, as the bytes between its quotes.
        let plain_string = |value: Option<&'a RawValue>| {
            value
                .map(RawValue::get)
                .and_then(|text| text.strip_prefix('"')?.strip_suffix('"'))
                .filter(|text| !text.is_empty())
        };
        let session = plain_string(raw.session_id)
            .map(|id| (KeySource::Session, id))
            .or_else(|| plain_string(raw.user).map(|user| (KeySource::User, user)));
        Ok(Self {
            model,
            stream: raw.stream.unwrap_or(false),
            messages: messages.len(),
            max_output_tokens,
            fallbacks,
            continuation: raw.continuation.unwrap_or(true),
            provider: raw.provider.filter(|p| p.get() != "null"),
            session,
        })
    }
}

/// The body without its `provider` member, whose value the envelope
/// borrowed: routing has read the preferences, and no upstream takes them.
/// Cutting the bytes here costs less than the adapter parsing past them (it
/// strips them too). `None`, and the body goes as it is, when the key is not
/// written plainly as `"provider"` right before its value.
pub fn without_provider(body: &[u8], value: &RawValue) -> Option<Vec<u8>> {
    const KEY: &[u8] = b"\"provider\"";
    let start = (value.get().as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let end = start.checked_add(value.get().len()).filter(|end| *end <= body.len())?;
    let back_over_space = |mut at: usize| {
        while at > 0 && body[at - 1].is_ascii_whitespace() {
            at -= 1;
        }
        at
    };
    let colon = back_over_space(start).checked_sub(1).filter(|at| body[*at] == b':')?;
    let key = back_over_space(colon).checked_sub(KEY.len())?;
    if &body[key..key + KEY.len()] != KEY {
        return None;
    }
    let before = back_over_space(key).checked_sub(1)?;
    // The comma that separates the member goes with it: the one before it,
    // else (a first member) the one after it.
    let (cut_from, cut_to) = match body[before] {
        b',' => (before, end),
        b'{' => {
            let after = end + body[end..].iter().take_while(|b| b.is_ascii_whitespace()).count();
            match body.get(after) {
                Some(b',') => (key, after + 1),
                Some(b'}') => (key, end),
                _ => return None,
            }
        }
        _ => return None,
    };
    let mut cut = Vec::with_capacity(body.len() - (cut_to - cut_from));
    cut.extend_from_slice(&body[..cut_from]);
    cut.extend_from_slice(&body[cut_to..]);
    Some(cut)
}

/// The start of a conversation that every later turn repeats: the messages up
/// to and including the first `user` message, as the bytes the caller sent.
/// Affinity hashes it when the caller names no session.
pub fn conversation_prefix(body: &[u8]) -> Option<Vec<u8>> {
    #[derive(Deserialize)]
    struct Messages<'a> {
        #[serde(borrow)]
        messages: Vec<&'a RawValue>,
    }
    let Messages { messages } = serde_json::from_slice(body).ok()?;
    let mut prefix = Vec::new();
    for message in messages {
        prefix.extend_from_slice(message.get().as_bytes());
        let role: RawMessage<'_> = serde_json::from_str(message.get()).ok()?;
        if role.role.as_deref() == Some("user") {
            return Some(prefix);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ChatEnvelope<'_>, ApiError> {
        ChatEnvelope::parse(text.as_bytes())
    }

    #[test]
    fn reads_model_and_stream() {
        let env =
            parse(r#"{"model":"a/b","messages":[{"role":"user","content":"hi"}],"stream":true,"x":{"y":1}}"#).unwrap();
        assert_eq!(env.model, "a/b");
        assert!(env.stream);
        assert_eq!(env.messages, 1);
        assert_eq!(env.max_output_tokens, None);
        let env =
            parse(r#"{"model":"a/b","messages":[{"role":"user"}],"max_tokens":9,"max_completion_tokens":7}"#).unwrap();
        assert_eq!(env.max_output_tokens, Some(7));
        let env = parse(r#"{"model":"a/b","messages":[{"role":"user"}],"fallbacks":["c/d","e/f"]}"#).unwrap();
        assert_eq!(env.fallbacks, ["c/d", "e/f"]);
    }

    #[test]
    fn rejects_bad_bodies_with_the_param() {
        for (body, param) in [
            (r#"{"messages":[{"role":"user"}]}"#, Some("model")),
            (r#"{"model":"a/b"}"#, Some("messages")),
            (r#"{"model":"a/b","messages":[]}"#, Some("messages")),
            (r#"{"model":"a/b","messages":[{"content":"x"}]}"#, Some("messages")),
            (r#"{"model":"a/b","messages":"hi"}"#, None),
            // Found while writing `fuzz/chat_envelope`: serde's derive read
            // this array as a message with role "user".
            (r#"{"model":"a/b","messages":[["user"]]}"#, None),
            (r#"{"model":"a/b","messages":[{"role":"user","role":"x"}]}"#, None),
            (r#"{"model":"a/b","messages":[{"role":null}]}"#, Some("messages")),
            (r#"{"model":5,"messages":[{"role":"user"}]}"#, None),
            (r#"{"model":"a/b","messages":[{"role":"user"}],"stream":"yes"}"#, None),
            (r#"{"model":"a/b","messages":[{"role":"user"}],"max_tokens":-1}"#, None),
            (
                r#"{"model":"a/b","messages":[{"role":"user"}],"max_tokens":0}"#,
                Some("max_tokens"),
            ),
            ("[1,2]", None),
            ("{not json", None),
            ("", None),
        ] {
            let err = parse(body).unwrap_err();
            assert_eq!(err.status, 400, "{body}");
            if param.is_some() {
                assert_eq!(err.param, param, "{body}");
            }
        }
    }

    #[test]
    fn the_provider_member_is_cut_wherever_it_stands() {
        let cases = [
            (
                r#"{"model":"a/b","provider":{"sort":"price"},"messages":[{"role":"user","content":"hi"}]}"#,
                r#"{"model":"a/b","messages":[{"role":"user","content":"hi"}]}"#,
            ),
            (
                r#"{ "provider" : {"order":["x"]} , "model":"a/b","messages":[{"role":"user","content":"hi"}]}"#,
                r#"{  "model":"a/b","messages":[{"role":"user","content":"hi"}]}"#,
            ),
            (
                r#"{"model":"a/b","messages":[{"role":"user","content":"\"provider\": {}"}],"provider":{"only":["y"]}}"#,
                r#"{"model":"a/b","messages":[{"role":"user","content":"\"provider\": {}"}]}"#,
            ),
        ];
        for (body, expected) in cases {
            let envelope = parse(body).unwrap();
            let cut = without_provider(body.as_bytes(), envelope.provider.unwrap()).unwrap();
            assert_eq!(String::from_utf8(cut).unwrap(), expected);
        }
        // A key written with an escape is left for the adapter to strip.
        let escaped = r#"{"model":"a/b","provid\u0065r":{"sort":"price"},"messages":[{"role":"user","content":"hi"}]}"#;
        let envelope = parse(escaped).unwrap();
        assert!(without_provider(escaped.as_bytes(), envelope.provider.unwrap()).is_none());
        // Only the member itself: its value is not the body's.
        let elsewhere = RawValue::from_string("{}".into()).unwrap();
        assert!(without_provider(escaped.as_bytes(), &elsewhere).is_none());
        // Alone in the object.
        let alone = r#"{"provider":{}}"#;
        let value = serde_json::from_str::<Raw<'_>>(alone).unwrap().provider.unwrap();
        assert_eq!(without_provider(alone.as_bytes(), value).unwrap(), b"{}");
    }
}
