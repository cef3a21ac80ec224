//! Google API errors → the gateway's error classes.
//!
//! Gemini answers errors as `{"error": {"code": 429, "message": "…", "status":
//! "RESOURCE_EXHAUSTED", "details": [...]}}` (sometimes wrapped in a one-item
//! array), over HTTP and as a stream event. The class comes from the canonical
//! `status` first, then the HTTP code:
//!
//! | Google | class |
//! |---|---|
//! | 429 `RESOURCE_EXHAUSTED` | rate-limited; retry after `Retry-After`, else `RetryInfo.retryDelay` |
//! | 400 with `ErrorInfo.reason` `API_KEY_INVALID` (or similar) | auth |
//! | 401 `UNAUTHENTICATED`, 403 `PERMISSION_DENIED` | auth |
//! | 503 `UNAVAILABLE` | overloaded |
//! | 400 `INVALID_ARGUMENT` "… exceeds the maximum number of tokens …" | context-length |
//! | 400 `INVALID_ARGUMENT` / `FAILED_PRECONDITION`, 404 `NOT_FOUND` | invalid-request |
//! | 500 `INTERNAL`, 504 `DEADLINE_EXCEEDED`, other | upstream(status) |

use serde_json::Value;
use tollgate_plugin_sdk::{AdapterError, ErrorClass, openai};

/// `ErrorInfo.reason`s that mean the key itself was refused.
const KEY_REASONS: [&str; 4] = [
    "API_KEY_INVALID",
    "API_KEY_EXPIRED",
    "API_KEY_SERVICE_BLOCKED",
    "API_KEY_HTTP_REFERRER_BLOCKED",
];

/// The fields of a Google error object the classification reads.
#[derive(Debug, Default)]
struct GoogleError {
    code: Option<u16>,
    message: Option<String>,
    status: Option<String>,
    reasons: Vec<String>,
    retry_delay: Option<u32>,
}

impl GoogleError {
    fn from_value(error: &Value) -> Self {
        let details = error.get("details").and_then(Value::as_array).into_iter().flatten();
        let mut out = GoogleError {
            code: error
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok()),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
            status: error.get("status").and_then(Value::as_str).map(str::to_owned),
            ..Default::default()
        };
        for detail in details {
            if let Some(reason) = detail.get("reason").and_then(Value::as_str) {
                out.reasons.push(reason.to_owned());
            }
            if let Some(delay) = detail.get("retryDelay").and_then(Value::as_str) {
                out.retry_delay = duration_seconds(delay);
            }
        }
        out
    }

    /// The error object of a body: `{"error": …}` or `[{"error": …}]`.
    fn from_body(body: &Value) -> Option<Self> {
        let body = match body {
            Value::Array(items) => items.first()?,
            other => other,
        };
        let error = body.get("error").filter(|e| e.is_object())?;
        Some(GoogleError::from_value(error))
    }

    fn is_context_length(&self) -> bool {
        self.message.as_deref().is_some_and(|m| {
            let m = m.to_ascii_lowercase();
            m.contains("exceeds the maximum number of tokens")
                || m.contains("maximum context length")
                || (m.contains("input token count") && m.contains("exceeds"))
        })
    }

    fn is_bad_key(&self) -> bool {
        self.reasons.iter().any(|r| KEY_REASONS.contains(&r.as_str()))
            || self.message.as_deref().is_some_and(|m| m.contains("API key not valid"))
    }

    fn classify(self, http_status: Option<u16>, retry_after: Option<u32>) -> AdapterError {
        let status = http_status.or(self.code);
        let class = if self.is_bad_key() {
            ErrorClass::Auth
        } else {
            match (self.status.as_deref(), status) {
                (Some("RESOURCE_EXHAUSTED"), _) | (_, Some(429)) => {
                    ErrorClass::RateLimited(retry_after.or(self.retry_delay))
                }
                (Some("UNAUTHENTICATED" | "PERMISSION_DENIED"), _) | (_, Some(401 | 403)) => ErrorClass::Auth,
                (Some("UNAVAILABLE"), _) | (_, Some(503 | 529)) => ErrorClass::Overloaded,
                (Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND" | "OUT_OF_RANGE"), _)
                | (_, Some(400 | 404 | 422))
                    if self.is_context_length() =>
                {
                    ErrorClass::ContextLength
                }
                (Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND" | "OUT_OF_RANGE"), _)
                | (_, Some(400 | 404 | 422)) => ErrorClass::InvalidRequest,
                (Some("DEADLINE_EXCEEDED"), _) => ErrorClass::Upstream(status.unwrap_or(504)),
                (_, Some(status)) => ErrorClass::Upstream(status),
                (_, None) => ErrorClass::Upstream(500),
            }
        };
        let message = match (self.message, status) {
            (Some(message), _) => message,
            (None, Some(status)) => format!("upstream returned HTTP {status}"),
            (None, None) => "Gemini reported an error".to_owned(),
        };
        AdapterError::new(class, message)
    }
}

/// Classify a non-2xx answer.
pub fn classify(status: u16, headers: &[(String, String)], body: &[u8]) -> AdapterError {
    let error = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|body| GoogleError::from_body(&body))
        .unwrap_or_default();
    error.classify(Some(status), openai::retry_after(headers))
}

/// An error inside a 2xx body or stream event (`{"error": …}`), classified
/// by its `code` and `status`.
pub fn in_body(body: &Value) -> Option<AdapterError> {
    Some(GoogleError::from_body(body)?.classify(None, None))
}

/// A protobuf `Duration` in JSON (`"23s"`, `"1.5s"`), rounded up to seconds.
fn duration_seconds(text: &str) -> Option<u32> {
    let seconds: f64 = text.strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil().min(u32::MAX as f64) as u32)
}

#[cfg(test)]
mod tests {
    use super::duration_seconds;

    #[test]
    fn retry_delays() {
        assert_eq!(duration_seconds("23s"), Some(23));
        assert_eq!(duration_seconds("1.2s"), Some(2));
        assert_eq!(duration_seconds("0s"), Some(0));
        assert_eq!(duration_seconds("5"), None);
        assert_eq!(duration_seconds("-1s"), None);
    }
}
