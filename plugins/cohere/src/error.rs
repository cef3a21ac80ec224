//! Cohere errors → the gateway's error classes.
//!
//! Cohere answers errors as `{"message": "…"}` (some with an `id`), and the
//! class comes from the HTTP status:
//!
//! | Cohere | class |
//! |---|---|
//! | 429 too many requests | rate-limited, with `Retry-After` seconds |
//! | 401 unauthorized, 403 forbidden, 498 invalid token | auth |
//! | 400 / 422 "too many tokens …" (or "context length") | context-length |
//! | 400 bad request, 404 not found, 422 unprocessable | invalid-request |
//! | 503 service unavailable (and 529) | overloaded |
//! | 402 payment required, 499 client closed, 500, 501, 504, other | upstream(status) |
//!
//! A failure mid-stream arrives as a `message-end` whose `delta.error` holds
//! the message (finish reason `ERROR`); it is classified by its words.

use serde_json::Value;
use tollgate_plugin_sdk::openai::{self, ErrorDetail};
use tollgate_plugin_sdk::{AdapterError, ErrorClass};

/// Classify a non-2xx answer.
pub fn classify(status: u16, headers: &[(String, String)], body: &[u8]) -> AdapterError {
    let message = message(body);
    let class = match status {
        429 => ErrorClass::RateLimited(openai::retry_after(headers)),
        401 | 403 | 498 => ErrorClass::Auth,
        400 | 404 | 422 if message.as_deref().is_some_and(is_context_length) => ErrorClass::ContextLength,
        400 | 404 | 422 => ErrorClass::InvalidRequest,
        503 | 529 => ErrorClass::Overloaded,
        other => ErrorClass::Upstream(other),
    };
    let message = message.unwrap_or_else(|| format!("upstream returned HTTP {status}"));
    AdapterError::new(class, message)
}

/// An error Cohere reported inside a successful stream (or body), by its text.
pub fn reported(message: &str) -> AdapterError {
    let lower = message.to_ascii_lowercase();
    if lower.contains("too many requests") || lower.contains("rate limit") {
        return AdapterError::new(ErrorClass::RateLimited(None), message);
    }
    if is_context_length(message) {
        return AdapterError::new(ErrorClass::ContextLength, message);
    }
    openai::classify_detail(&ErrorDetail {
        message: Some(message.to_owned()).filter(|m| !m.is_empty()),
        ..Default::default()
    })
}

/// The `message` of a Cohere error body (OpenAI-style `{"error": …}` bodies
/// from proxies in front of Cohere are read too).
fn message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    match value.get("message").and_then(Value::as_str) {
        Some(message) if !message.is_empty() => Some(message.to_owned()),
        _ => ErrorDetail::from_body(body).message,
    }
}

/// Cohere words a too-long prompt as "too many tokens: …".
fn is_context_length(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("too many tokens") || m.contains("context length") || m.contains("maximum context")
}
