//! The part of a chat-completions request the gateway itself reads. The body is
//! parsed once, borrowing from the request bytes; every other field stays in the
//! original bytes and reaches the adapter untouched.

use std::borrow::Cow;

use serde::Deserialize;

use crate::error::ApiError;

#[derive(Debug)]
pub struct ChatEnvelope<'a> {
    pub model: Cow<'a, str>,
    pub stream: bool,
}

#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    messages: Option<Vec<RawMessage<'a>>>,
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
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
        Ok(Self {
            model,
            stream: raw.stream.unwrap_or(false),
        })
    }
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
    }

    #[test]
    fn rejects_bad_bodies_with_the_param() {
        for (body, param) in [
            (r#"{"messages":[{"role":"user"}]}"#, Some("model")),
            (r#"{"model":"a/b"}"#, Some("messages")),
            (r#"{"model":"a/b","messages":[]}"#, Some("messages")),
            (r#"{"model":"a/b","messages":[{"content":"x"}]}"#, Some("messages")),
            (r#"{"model":"a/b","messages":"hi"}"#, None),
            (r#"{"model":5,"messages":[{"role":"user"}]}"#, None),
            (r#"{"model":"a/b","messages":[{"role":"user"}],"stream":"yes"}"#, None),
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
}
