//! Helpers for OpenAI chat-completions payloads: preparing a request for an
//! upstream, reading `usage`, classifying and building errors; and
//! [`Compatible`], the whole protocol of an OpenAI-compatible upstream.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::json::{RawObject, is_object};
use crate::{AdapterError, ErrorClass, ResponseHead, Usage};

mod compatible;

pub use compatible::{Compatible, CompatibleStream};

/// Upper bound, in bytes, for [`AdapterError::message`] built by this crate.
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// Request fields that belong to the gateway, not to any upstream.
pub const GATEWAY_FIELDS: [&str; 3] = ["models", "fallbacks", "continuation"];

/// Prepare the caller's chat-completions body for an OpenAI-compatible upstream.
///
/// The body must be a JSON object. `model` is set to `upstream_model`; the
/// gateway's own fields ([`GATEWAY_FIELDS`]) are removed. When `stream` is set,
/// `stream: true` is set and `stream_options.include_usage: true` is merged
/// into any existing `stream_options`; otherwise `stream` and `stream_options`
/// are removed (the host expects a single JSON response). When
/// `default_max_tokens` is set and the body has neither `max_tokens` nor
/// `max_completion_tokens`, `max_tokens` is set to it (the gateway's cap, see
/// `CallContext::max_output_tokens`). Every other field is passed through byte
/// for byte, in its original order.
pub fn prepare_request(
    body: &[u8],
    upstream_model: &str,
    stream: bool,
    default_max_tokens: Option<u32>,
) -> Result<Vec<u8>, AdapterError> {
    let mut obj = RawObject::parse_slice(body)
        .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
    prepare_object(&mut obj, upstream_model, stream, default_max_tokens)?;
    Ok(obj.to_vec())
}

/// Appends `{"role": "assistant", "content": partial}` to `messages`: the
/// OpenAI-compatible way to ask a model to continue an answer another upstream
/// started (see `CallContext::continuation`).
pub fn append_continuation(obj: &mut RawObject<'_>, partial: &str) -> Result<(), AdapterError> {
    let internal = |e: serde_json::Error| AdapterError::internal(e.to_string());
    let mut messages: Vec<Box<RawValue>> = match obj.get("messages") {
        Some(raw) => {
            serde_json::from_str(raw.get()).map_err(|_| AdapterError::invalid_request("'messages' must be an array"))?
        }
        None => Vec::new(),
    };
    let message = serde_json::json!({ "role": "assistant", "content": partial });
    messages.push(serde_json::value::to_raw_value(&message).map_err(internal)?);
    let raw = serde_json::value::to_raw_value(&messages).map_err(internal)?;
    obj.insert_raw("messages", Cow::Owned(raw));
    Ok(())
}

/// [`prepare_request`] on an already parsed object, for adapters that edit it
/// further before serializing.
pub fn prepare_object(
    obj: &mut RawObject<'_>,
    upstream_model: &str,
    stream: bool,
    default_max_tokens: Option<u32>,
) -> Result<(), AdapterError> {
    let internal = |e: serde_json::Error| AdapterError::internal(e.to_string());
    for field in GATEWAY_FIELDS {
        obj.remove(field);
    }
    obj.insert("model", upstream_model).map_err(internal)?;
    if let Some(cap) = default_max_tokens
        && obj.get_non_null("max_tokens").is_none()
        && obj.get_non_null("max_completion_tokens").is_none()
    {
        obj.insert("max_tokens", &cap).map_err(internal)?;
    }
    if stream {
        obj.insert_raw("stream", Cow::Owned(raw_true()));
        let mut options = match obj.get("stream_options").filter(|v| is_object(v)) {
            Some(raw) => RawObject::parse(raw.get()).map_err(internal)?.into_owned(),
            None => RawObject::new(),
        };
        options.insert_raw("include_usage", Cow::Owned(raw_true()));
        let raw = RawValue::from_string(
            String::from_utf8(options.to_vec())
                .map_err(|e| AdapterError::internal(format!("stream_options is not UTF-8: {e}")))?,
        )
        .map_err(internal)?;
        obj.insert_raw("stream_options", Cow::Owned(raw));
    } else {
        obj.remove("stream");
        obj.remove("stream_options");
    }
    Ok(())
}

fn raw_true() -> Box<RawValue> {
    RawValue::from_string("true".to_owned()).expect("`true` is valid JSON")
}

/// One `tools[]` entry of a chat-completions request: a function tool.
pub struct FunctionTool<'a> {
    pub name: &'a str,
    pub description: Option<&'a str>,
    /// `function.parameters` as sent (absent or `null` is `None`); adapters
    /// check its shape against what their provider accepts.
    pub parameters: Option<&'a Value>,
    pub strict: bool,
}

/// The request's `tools`, which must all be function tools with a name.
/// `provider` names who refuses any other kind, in the error message.
pub fn function_tools<'a>(
    request: &'a serde_json::Map<String, Value>,
    provider: &str,
) -> Result<Vec<FunctionTool<'a>>, AdapterError> {
    let tools = match request.get("tools") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(AdapterError::invalid_request("'tools' must be an array")),
    };
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("function");
        let function = tool.get("function").filter(|_| kind == "function").ok_or_else(|| {
            AdapterError::invalid_request(format!("tools[{i}]: only 'function' tools are supported by {provider}"))
        })?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| AdapterError::invalid_request(format!("tools[{i}].function.name is required")))?;
        out.push(FunctionTool {
            name,
            description: function.get("description").and_then(Value::as_str),
            parameters: function.get("parameters").filter(|p| !p.is_null()),
            strict: function.get("strict").and_then(Value::as_bool) == Some(true),
        });
    }
    Ok(out)
}

/// Read an OpenAI `usage` object: `prompt_tokens` → input, `completion_tokens`
/// → output, `prompt_tokens_details.cached_tokens` → cache-read,
/// `completion_tokens_details.reasoning_tokens` → reasoning. Missing counts
/// are 0 (input/output) or `None`. Returns `None` unless `usage` is an object.
pub fn usage_from_value(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |v: Option<&Value>| v.and_then(as_count);
    let detail = |outer: &str, inner: &str| count(usage.get(outer).and_then(|d| d.get(inner)));
    Some(Usage {
        input: count(usage.get("prompt_tokens")).unwrap_or(0),
        output: count(usage.get("completion_tokens")).unwrap_or(0),
        cache_read: detail("prompt_tokens_details", "cached_tokens"),
        cache_write: None,
        reasoning: detail("completion_tokens_details", "reasoning_tokens"),
    })
}

/// The OpenAI `usage` object for `usage`, with `prompt_tokens_details` /
/// `completion_tokens_details` only when cached / reasoning tokens were
/// reported.
pub fn usage_json(usage: &Usage) -> Value {
    let mut out = serde_json::json!({
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
    });
    if let Some(cached) = usage.cache_read {
        out["prompt_tokens_details"] = serde_json::json!({ "cached_tokens": cached });
    }
    if let Some(reasoning) = usage.reasoning {
        out["completion_tokens_details"] = serde_json::json!({ "reasoning_tokens": reasoning });
    }
    out
}

/// [`usage_from_value`] on raw JSON text; `None` for `null`, non-objects or
/// invalid JSON.
pub fn usage_from_raw(usage: &RawValue) -> Option<Usage> {
    if !is_object(usage) {
        return None;
    }
    usage_from_value(&serde_json::from_str(usage.get()).ok()?)
}

fn as_count(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64))
}

/// The fields of an OpenAI error object `{"message","type","code"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetail {
    pub message: Option<String>,
    /// `type`.
    pub kind: Option<String>,
    /// `code`, stringified if it was a number.
    pub code: Option<String>,
}

impl ErrorDetail {
    /// Read an error object; a bare string is taken as the message.
    pub fn from_value(error: &Value) -> Self {
        let text = |v: Option<&Value>| match v? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        match error {
            Value::String(s) => ErrorDetail {
                message: Some(s.clone()).filter(|s| !s.is_empty()),
                ..Default::default()
            },
            Value::Object(map) => ErrorDetail {
                message: text(map.get("message")),
                kind: text(map.get("type")),
                code: text(map.get("code")),
            },
            _ => ErrorDetail::default(),
        }
    }

    /// Read the `error` member of an OpenAI error body. Falls back to a
    /// top-level `message` (some upstreams omit the `error` wrapper).
    pub fn from_body(body: &[u8]) -> Self {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            return ErrorDetail::default();
        };
        match value.get("error") {
            Some(error) if !error.is_null() => ErrorDetail::from_value(error),
            _ => ErrorDetail::from_value(&value),
        }
    }

    /// `code` parsed as an HTTP status (100–599), if it is one.
    pub fn status_code(&self) -> Option<u16> {
        self.code
            .as_deref()?
            .parse::<u16>()
            .ok()
            .filter(|s| (100..600).contains(s))
    }

    fn is_context_length(&self) -> bool {
        if self.code.as_deref() == Some("context_length_exceeded") {
            return true;
        }
        self.message.as_deref().is_some_and(|m| {
            let m = m.to_ascii_lowercase();
            m.contains("context length") || m.contains("maximum context")
        })
    }

    fn mentions(&self, needles: &[&str]) -> bool {
        [&self.code, &self.kind, &self.message].into_iter().flatten().any(|s| {
            let s = s.to_ascii_lowercase();
            needles.iter().any(|n| s.contains(n))
        })
    }
}

/// Classify a non-2xx upstream response with an (optionally) OpenAI-shaped
/// error body `{"error":{"message","type","code"}}`.
///
/// | status | class |
/// |---|---|
/// | 429 | rate-limited, with `Retry-After` seconds if it is an integer |
/// | 401, 403 | auth |
/// | 400, 404, 422 | invalid-request, or context-length when the code is `context_length_exceeded` or the message mentions "context length" / "maximum context" |
/// | 503, 529 | overloaded |
/// | other | upstream(status) |
///
/// The message is the upstream's, else `upstream returned HTTP <status>`,
/// capped at [`MAX_ERROR_MESSAGE`] bytes.
pub fn classify_error(head: &ResponseHead, body: &[u8]) -> AdapterError {
    let detail = ErrorDetail::from_body(body);
    classify_status(head.status, retry_after(&head.headers), &detail)
}

/// The classification table of [`classify_error`], for adapters that parse
/// their provider's error body themselves.
pub fn classify_status(status: u16, retry_after: Option<u32>, detail: &ErrorDetail) -> AdapterError {
    let class = match status {
        429 => ErrorClass::RateLimited(retry_after),
        401 | 403 => ErrorClass::Auth,
        400 | 404 | 422 if detail.is_context_length() => ErrorClass::ContextLength,
        400 | 404 | 422 => ErrorClass::InvalidRequest,
        503 | 529 => ErrorClass::Overloaded,
        other => ErrorClass::Upstream(other),
    };
    let message = match &detail.message {
        Some(m) => m.clone(),
        None => format!("upstream returned HTTP {status}"),
    };
    AdapterError::new(class, message)
}

/// Classify an error reported inside a 2xx body or stream, where there is no
/// HTTP status to go by.
///
/// A numeric `code` is used as the status (see [`classify_status`]).
/// Otherwise code/type/message are searched for words: rate limit →
/// rate-limited, overload → overloaded, context length → context-length,
/// authentication / api key → auth, invalid request → invalid-request;
/// anything else is upstream(500).
pub fn classify_detail(detail: &ErrorDetail) -> AdapterError {
    if let Some(status) = detail.status_code() {
        return classify_status(status, None, detail);
    }
    let class = if detail.mentions(&["rate_limit", "rate limit", "ratelimit", "too many requests"]) {
        ErrorClass::RateLimited(None)
    } else if detail.mentions(&["overload", "capacity", "unavailable"]) {
        ErrorClass::Overloaded
    } else if detail.is_context_length() {
        ErrorClass::ContextLength
    } else if detail.mentions(&["authentication", "invalid_api_key", "api key", "permission"]) {
        ErrorClass::Auth
    } else if detail.mentions(&["invalid_request"]) {
        ErrorClass::InvalidRequest
    } else {
        ErrorClass::Upstream(500)
    };
    let message = detail
        .message
        .clone()
        .unwrap_or_else(|| "upstream reported an error".to_owned());
    AdapterError::new(class, message)
}

/// Recognise an in-stream (or in-2xx-body) error chunk: an object with a
/// non-null `error` member (object or string). Returns it classified with
/// [`classify_detail`].
pub fn stream_error(chunk: &RawObject<'_>) -> Option<AdapterError> {
    let raw = chunk.get_non_null("error")?;
    let value: Value = serde_json::from_str(raw.get()).ok()?;
    match value {
        Value::Object(_) | Value::String(_) => Some(classify_detail(&ErrorDetail::from_value(&value))),
        _ => None,
    }
}

/// The `Retry-After` header as whole seconds, if it is an integer.
pub fn retry_after(headers: &[(String, String)]) -> Option<u32> {
    header(headers, "retry-after")?.trim().parse().ok()
}

/// The first header named `name` (ASCII case-insensitive).
pub fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Cap `message` at [`MAX_ERROR_MESSAGE`] bytes on a character boundary,
/// marking the cut with `…`.
pub fn cap_message(mut message: String) -> String {
    if message.len() > MAX_ERROR_MESSAGE {
        let mut cut = MAX_ERROR_MESSAGE - '…'.len_utf8();
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    message
}

/// An OpenAI error body: `{"error":{"message","type","code"}}` (`code` is
/// `null` when absent).
pub fn error_body(message: &str, kind: &str, code: Option<&str>) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "error": { "message": message, "type": kind, "code": code }
    }))
    .expect("a JSON value always serializes")
}

/// The OpenAI error `type` and `code` conventionally used for an error class.
pub fn error_type(class: &ErrorClass) -> (&'static str, Option<&'static str>) {
    match class {
        ErrorClass::InvalidRequest => ("invalid_request_error", None),
        ErrorClass::Auth => ("authentication_error", None),
        ErrorClass::RateLimited(_) => ("rate_limit_error", Some("rate_limit_exceeded")),
        ErrorClass::Overloaded => ("overloaded_error", Some("overloaded")),
        ErrorClass::ContextLength => ("invalid_request_error", Some("context_length_exceeded")),
        ErrorClass::Upstream(_) => ("upstream_error", None),
        ErrorClass::Internal => ("server_error", None),
    }
}

/// [`error_body`] for an [`AdapterError`], typed per [`error_type`].
pub fn error_body_for(error: &AdapterError) -> Vec<u8> {
    let (kind, code) = error_type(&error.class);
    error_body(&error.message, kind, code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prepare(body: Value, stream: bool) -> Value {
        let out = prepare_request(body.to_string().as_bytes(), "up-model", stream, None).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn prepare_sets_model_and_strips_gateway_fields() {
        let body = json!({
            "model": "alias", "models": ["a", "b"], "fallbacks": [], "continuation": {"x": 1},
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            "tool_choice": "auto", "response_format": {"type": "json_object"},
            "temperature": 0.7, "x_unknown": [1, 2]
        });
        let out = prepare(body.clone(), false);
        let mut expected = body;
        let map = expected.as_object_mut().unwrap();
        for f in GATEWAY_FIELDS {
            map.remove(f);
        }
        map.insert("model".into(), json!("up-model"));
        assert_eq!(out, expected);
    }

    #[test]
    fn prepare_streaming_merges_stream_options() {
        let out = prepare(
            json!({"model": "m", "messages": [], "stream_options": {"foo": 1, "include_usage": false}}),
            true,
        );
        assert_eq!(out["stream"], json!(true));
        assert_eq!(out["stream_options"], json!({"foo": 1, "include_usage": true}));

        let out = prepare(json!({"messages": [], "stream": false}), true);
        assert_eq!(out["stream"], json!(true));
        assert_eq!(out["stream_options"], json!({"include_usage": true}));
        assert_eq!(out["model"], json!("up-model"));

        let out = prepare(json!({"messages": [], "stream_options": null}), true);
        assert_eq!(out["stream_options"], json!({"include_usage": true}));
    }

    #[test]
    fn prepare_non_streaming_drops_stream_fields() {
        let out = prepare(
            json!({"messages": [], "stream": true, "stream_options": {"include_usage": true}}),
            false,
        );
        assert_eq!(out, json!({"messages": [], "model": "up-model"}));
    }

    #[test]
    fn prepare_keeps_bytes_of_other_fields() {
        let body = br#"{"temperature":1.0,"messages":[{"role":"user","content":"\u00e9"}],"model":"a"}"#;
        let out = prepare_request(body, "b", false, None).unwrap();
        assert_eq!(
            out,
            br#"{"temperature":1.0,"messages":[{"role":"user","content":"\u00e9"}],"model":"b"}"#
        );
    }

    #[test]
    fn prepare_rejects_invalid_bodies() {
        for body in [&b"not json"[..], b"[1]", b"\"s\"", b"", b"{\"a\":1"] {
            let err = prepare_request(body, "m", true, None).unwrap_err();
            assert_eq!(err.class, ErrorClass::InvalidRequest, "{body:?}");
        }
    }

    #[test]
    fn usage_mapping() {
        let u = usage_from_value(&json!({
            "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 3},
            "completion_tokens_details": {"reasoning_tokens": 2}
        }))
        .unwrap();
        assert_eq!(
            u,
            Usage {
                input: 10,
                output: 5,
                cache_read: Some(3),
                cache_write: None,
                reasoning: Some(2)
            }
        );
        let u = usage_from_value(&json!({"prompt_tokens": 7, "prompt_tokens_details": null})).unwrap();
        assert_eq!((u.input, u.output, u.cache_read, u.reasoning), (7, 0, None, None));
        assert_eq!(usage_from_value(&json!(null)), None);
        assert_eq!(usage_from_value(&json!(3)), None);
        let raw = RawValue::from_string(r#"{"prompt_tokens":1,"completion_tokens":2}"#.into()).unwrap();
        assert_eq!(usage_from_raw(&raw).unwrap().output, 2);
        assert_eq!(usage_from_raw(&RawValue::from_string("null".into()).unwrap()), None);
    }

    fn head(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
        ResponseHead {
            status,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn err_body(message: &str, kind: &str, code: Option<&str>) -> Vec<u8> {
        error_body(message, kind, code)
    }

    #[test]
    fn classify_statuses() {
        let e = classify_error(&head(429, &[("Retry-After", " 7 ")]), b"");
        assert_eq!(e.class, ErrorClass::RateLimited(Some(7)));
        assert_eq!(e.message, "upstream returned HTTP 429");
        let e = classify_error(&head(429, &[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]), b"");
        assert_eq!(e.class, ErrorClass::RateLimited(None));
        assert_eq!(classify_error(&head(401, &[]), b"").class, ErrorClass::Auth);
        assert_eq!(classify_error(&head(403, &[]), b"").class, ErrorClass::Auth);
        for s in [400, 404, 422] {
            let e = classify_error(&head(s, &[]), &err_body("bad field", "invalid_request_error", None));
            assert_eq!(e.class, ErrorClass::InvalidRequest);
            assert_eq!(e.message, "bad field");
        }
        assert_eq!(classify_error(&head(503, &[]), b"").class, ErrorClass::Overloaded);
        assert_eq!(classify_error(&head(529, &[]), b"").class, ErrorClass::Overloaded);
        let e = classify_error(&head(500, &[]), b"<html>oops</html>");
        assert_eq!(e.class, ErrorClass::Upstream(500));
        assert_eq!(e.message, "upstream returned HTTP 500");
        assert_eq!(classify_error(&head(418, &[]), b"").class, ErrorClass::Upstream(418));
    }

    #[test]
    fn classify_context_length() {
        let e = classify_error(
            &head(400, &[]),
            &err_body("too long", "invalid_request_error", Some("context_length_exceeded")),
        );
        assert_eq!(e.class, ErrorClass::ContextLength);
        let e = classify_error(
            &head(400, &[]),
            &err_body(
                "This model's maximum context length is 8192 tokens",
                "invalid_request_error",
                None,
            ),
        );
        assert_eq!(e.class, ErrorClass::ContextLength);
        let e = classify_error(
            &head(422, &[]),
            &err_body("Exceeds the Maximum Context window", "x", None),
        );
        assert_eq!(e.class, ErrorClass::ContextLength);
        // Only client-error statuses are reclassified.
        let e = classify_error(&head(500, &[]), &err_body("x", "y", Some("context_length_exceeded")));
        assert_eq!(e.class, ErrorClass::Upstream(500));
    }

    #[test]
    fn classify_odd_bodies() {
        let e = classify_error(&head(400, &[]), br#"{"error":"plain string"}"#);
        assert_eq!(e.message, "plain string");
        let e = classify_error(&head(400, &[]), br#"{"message":"top level"}"#);
        assert_eq!(e.message, "top level");
        let e = classify_error(&head(400, &[]), br#"{"error":{"message":""}}"#);
        assert_eq!(e.message, "upstream returned HTTP 400");
        let e = classify_error(&head(400, &[]), br#"{"error":{"code":123}}"#);
        assert_eq!(e.message, "upstream returned HTTP 400");
    }

    #[test]
    fn messages_are_capped() {
        let long = "é".repeat(2000);
        let e = classify_error(&head(400, &[]), &err_body(&long, "x", None));
        assert!(e.message.len() <= MAX_ERROR_MESSAGE);
        assert!(e.message.ends_with('…'));
        assert!(e.message.starts_with("éé"));
        assert_eq!(cap_message("short".into()), "short");
        assert!(AdapterError::internal("x".repeat(5000)).message.len() <= MAX_ERROR_MESSAGE);
    }

    fn chunk_error(text: &str) -> Option<AdapterError> {
        stream_error(&RawObject::parse(text).unwrap())
    }

    #[test]
    fn in_stream_errors() {
        assert_eq!(chunk_error(r#"{"choices":[]}"#), None);
        assert_eq!(chunk_error(r#"{"error":null,"choices":[]}"#), None);
        let e = chunk_error(r#"{"error":{"message":"slow down","code":429}}"#).unwrap();
        assert_eq!(e.class, ErrorClass::RateLimited(None));
        assert_eq!(e.message, "slow down");
        let e = chunk_error(r#"{"error":{"message":"m","code":"502"}}"#).unwrap();
        assert_eq!(e.class, ErrorClass::Upstream(502));
        let e = chunk_error(r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#).unwrap();
        assert_eq!(e.class, ErrorClass::RateLimited(None));
        let e = chunk_error(r#"{"error":{"message":"Model is overloaded","type":"overloaded_error"}}"#).unwrap();
        assert_eq!(e.class, ErrorClass::Overloaded);
        let e = chunk_error(r#"{"error":{"message":"boom","type":"server_error"}}"#).unwrap();
        assert_eq!(e.class, ErrorClass::Upstream(500));
        assert_eq!(e.message, "boom");
        let e = chunk_error(r#"{"error":{"code":"context_length_exceeded"}}"#).unwrap();
        assert_eq!(e.class, ErrorClass::ContextLength);
        assert_eq!(e.message, "upstream reported an error");
        let e = chunk_error(r#"{"error":"bad things"}"#).unwrap();
        assert_eq!(e.message, "bad things");
    }

    #[test]
    fn builds_error_bodies() {
        let body: Value = serde_json::from_slice(&error_body("m", "t", Some("c"))).unwrap();
        assert_eq!(body, json!({"error": {"message": "m", "type": "t", "code": "c"}}));
        let body: Value = serde_json::from_slice(&error_body_for(&AdapterError::new(ErrorClass::Auth, "no"))).unwrap();
        assert_eq!(
            body,
            json!({"error": {"message": "no", "type": "authentication_error", "code": null}})
        );
        // Round trip through the classifier.
        let e = classify_error(
            &head(400, &[]),
            &error_body_for(&AdapterError::new(ErrorClass::ContextLength, "long")),
        );
        assert_eq!(e.class, ErrorClass::ContextLength);
    }

    #[test]
    fn injects_the_gateway_cap_only_when_the_caller_set_none() {
        let bare = br#"{"model":"a/b","messages":[]}"#;
        let out: Value = serde_json::from_slice(&prepare_request(bare, "m", false, Some(77)).unwrap()).unwrap();
        assert_eq!(out["max_tokens"], 77);
        for body in [
            &br#"{"model":"a/b","max_tokens":5}"#[..],
            br#"{"model":"a/b","max_completion_tokens":5}"#,
        ] {
            let out: Value = serde_json::from_slice(&prepare_request(body, "m", false, Some(77)).unwrap()).unwrap();
            assert_ne!(out["max_tokens"], 77, "{out}");
        }
        let out: Value = serde_json::from_slice(&prepare_request(bare, "m", false, None).unwrap()).unwrap();
        assert!(out.get("max_tokens").is_none());
    }

    #[test]
    fn continuation_appends_an_assistant_message() {
        let body = br#"{"model":"a/b","messages":[{"role":"user","content":"hi"}],"temperature":0.5}"#;
        let mut obj = RawObject::parse_slice(body).unwrap();
        append_continuation(&mut obj, "Hello the").unwrap();
        let out: Value = serde_json::from_slice(&obj.to_vec()).unwrap();
        assert_eq!(
            out["messages"],
            serde_json::json!([{"role":"user","content":"hi"},{"role":"assistant","content":"Hello the"}])
        );
        assert_eq!(out["temperature"], 0.5);
    }
}
