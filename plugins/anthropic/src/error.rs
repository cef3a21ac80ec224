//! Anthropic errors → the gateway's error classes.
//!
//! Anthropic answers errors as `{"type": "error", "error": {"type", "message"},
//! "request_id"}`, over HTTP and as an `error` event mid-stream. The class
//! comes from `error.type` first, then the HTTP status:
//!
//! | Anthropic | class |
//! |---|---|
//! | 429 `rate_limit_error` | rate-limited, retry after `retry-after` |
//! | 529 `overloaded_error` | overloaded |
//! | 401 `authentication_error`, 403 `permission_error` | auth |
//! | 400 `invalid_request_error` "prompt is too long: N tokens > M maximum" | context-length |
//! | 400 `invalid_request_error`, 404 `not_found_error`, 413 `request_too_large` | invalid-request |
//! | 500 `api_error`, 504 `timeout_error`, 402 `billing_error`, other | upstream(status) |

use serde_json::Value;
use tollgate_plugin_sdk::{AdapterError, ErrorClass, openai};

/// The fields of an Anthropic error the classification reads.
#[derive(Debug, Default)]
struct AnthropicError {
    kind: Option<String>,
    message: Option<String>,
}

impl AnthropicError {
    /// `{"type": "error", "error": {...}}`, or a bare `{"error": {...}}`.
    fn from_body(body: &Value) -> Option<Self> {
        let error = body.get("error").filter(|e| e.is_object())?;
        Some(AnthropicError {
            kind: error.get("type").and_then(Value::as_str).map(str::to_owned),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
        })
    }

    fn is_context_length(&self) -> bool {
        self.message.as_deref().is_some_and(|m| {
            let m = m.to_ascii_lowercase();
            m.contains("prompt is too long") || m.contains("exceed context limit") || m.contains("context window")
        })
    }

    fn classify(self, status: Option<u16>, retry_after: Option<u32>) -> AdapterError {
        let class = match (self.kind.as_deref(), status) {
            (Some("rate_limit_error"), _) | (None, Some(429)) => ErrorClass::RateLimited(retry_after),
            (Some("overloaded_error"), _) | (None, Some(529 | 503)) => ErrorClass::Overloaded,
            (Some("authentication_error" | "permission_error"), _) | (None, Some(401 | 403)) => ErrorClass::Auth,
            (Some("invalid_request_error"), _) | (None, Some(400)) if self.is_context_length() => {
                ErrorClass::ContextLength
            }
            (Some("invalid_request_error" | "not_found_error" | "request_too_large"), _)
            | (None, Some(400 | 404 | 413 | 422)) => ErrorClass::InvalidRequest,
            (Some("timeout_error"), None) => ErrorClass::Upstream(504),
            (Some("billing_error"), None) => ErrorClass::Upstream(402),
            (_, Some(status)) => ErrorClass::Upstream(status),
            (_, None) => ErrorClass::Upstream(500),
        };
        let message = match (self.message, status) {
            (Some(message), _) => message,
            (None, Some(status)) => format!("upstream returned HTTP {status}"),
            (None, None) => "Anthropic reported an error".to_owned(),
        };
        AdapterError::new(class, message)
    }
}

/// Classify a non-2xx answer.
pub fn classify(status: u16, headers: &[(String, String)], body: &[u8]) -> AdapterError {
    let error = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|body| AnthropicError::from_body(&body))
        .unwrap_or_default();
    error.classify(Some(status), openai::retry_after(headers))
}

/// An error inside a 2xx body or stream event (`{"type": "error", …}`),
/// classified by its type alone.
pub fn in_body(body: &Value) -> Option<AdapterError> {
    if body.get("type").and_then(Value::as_str) != Some("error") {
        return None;
    }
    Some(AnthropicError::from_body(body).unwrap_or_default().classify(None, None))
}
