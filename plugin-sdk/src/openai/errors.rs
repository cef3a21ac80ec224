//! OpenAI-shaped errors: classifying an upstream's error (by status, or by
//! its words when it arrives inside a 2xx body or stream) into the
//! [`ErrorClass`] the host retries and bills by, and building error bodies.
//! Messages are capped, since they come from the upstream and reach the
//! caller.

use serde_json::Value;

use crate::json::RawObject;
use crate::{AdapterError, ErrorClass, ResponseHead};

/// Upper bound, in bytes, for [`AdapterError::message`] built by this crate.
pub const MAX_ERROR_MESSAGE: usize = 1024;
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
}
