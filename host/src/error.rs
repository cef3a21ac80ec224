//! API errors in the OpenAI shape:
//! `{"error": {"message", "type", "code", "param"}, "service": {"request_id"}}`.
//! Every failure a caller can see goes through [`ApiError`], so statuses and
//! bodies stay consistent (see docs/errors.md).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::plugins::{AdapterError, AdapterFault, ErrorClass};

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    pub param: Option<&'static str>,
    pub request_id: Option<String>,
    /// `service.attempts`, when upstream attempts were made.
    pub attempts: Option<serde_json::Value>,
    /// The upstream's `Retry-After`, in seconds, when it rate-limited us.
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            code,
            message: message.into(),
            param: None,
            request_id: None,
            attempts: None,
            retry_after: None,
        }
    }

    pub fn with_param(mut self, param: &'static str) -> Self {
        self.param = Some(param);
        self
    }

    pub fn with_attempts(mut self, attempts: serde_json::Value) -> Self {
        self.attempts = Some(attempts);
        self
    }

    /// Whether another candidate should be tried after this failure: the
    /// upstream or its adapter failed, not the caller's request.
    pub fn is_retryable(&self) -> bool {
        self.is_provider_failure()
            || matches!(
                self.code,
                "upstream_auth_failed"
                    | "invalid_upstream_response"
                    | "adapter_failed"
                    | "provider_not_configured"
                    | "provider_circuit_open"
            )
    }

    /// Whether this failure counts against the provider's health (its
    /// upstream failed, as opposed to our adapter, config or breaker).
    pub fn is_provider_failure(&self) -> bool {
        matches!(
            self.code,
            "upstream_error"
                | "upstream_rate_limited"
                | "upstream_overloaded"
                | "upstream_unreachable"
                | "upstream_timeout"
        )
    }

    pub fn with_request_id(mut self, request_id: &str) -> Self {
        self.request_id = Some(request_id.to_string());
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            message,
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            message,
        )
    }

    pub fn model_not_found(model: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!("The model '{model}' does not exist; GET /v1/models lists the models you can use."),
        )
        .with_param("model")
    }

    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            format!("The request body exceeds the {limit}-byte limit."),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "internal_error",
            message,
        )
    }

    pub fn adapter_fault(fault: &AdapterFault) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "adapter_failed",
            fault.to_string(),
        )
    }

    pub fn upstream_unreachable(provider: &str, detail: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "upstream_unreachable",
            format!("provider '{provider}' could not be reached: {detail}"),
        )
    }

    pub fn upstream_timeout(provider: &str, what: &str) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout_error",
            "upstream_timeout",
            format!("provider '{provider}' timed out {what}"),
        )
    }

    /// Maps an adapter's classification of an upstream failure. Problems with the
    /// caller's request keep a 4xx; everything else is the gateway's upstream
    /// failing, so 502.
    pub fn from_upstream(provider: &str, error: &AdapterError) -> Self {
        let mut mapped = Self::map_upstream(provider, error);
        if let ErrorClass::RateLimited(retry_after) = error.class {
            mapped.retry_after = retry_after;
        }
        mapped
    }

    fn map_upstream(provider: &str, error: &AdapterError) -> Self {
        let detail = &error.message;
        match error.class {
            ErrorClass::InvalidRequest => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "upstream_rejected_request",
                format!("provider '{provider}' rejected the request: {detail}"),
            ),
            ErrorClass::ContextLength => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "context_length_exceeded",
                format!("provider '{provider}': {detail}"),
            ),
            ErrorClass::Auth => Self::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "upstream_auth_failed",
                format!("provider '{provider}' rejected the gateway's credentials: {detail}"),
            ),
            ErrorClass::RateLimited(_) => Self::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "upstream_rate_limited",
                format!("provider '{provider}' is rate limiting: {detail}"),
            ),
            ErrorClass::Overloaded => Self::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "upstream_overloaded",
                format!("provider '{provider}' is overloaded: {detail}"),
            ),
            ErrorClass::Upstream(status) => Self::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "upstream_error",
                format!("provider '{provider}' failed with HTTP {status}: {detail}"),
            ),
            ErrorClass::Internal => Self::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "invalid_upstream_response",
                format!("provider '{provider}' gave an answer the adapter could not use: {detail}"),
            ),
        }
    }

    /// The `error` object alone, as also used inside a final stream chunk.
    pub fn error_object(&self) -> serde_json::Value {
        json!({ "message": self.message, "type": self.kind, "code": self.code, "param": self.param })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, code = self.code, request_id = ?self.request_id, "{}", self.message);
        }
        let mut body = json!({ "error": self.error_object() });
        if let Some(id) = &self.request_id {
            body["service"] = json!({ "request_id": id });
            if let Some(attempts) = &self.attempts {
                body["service"]["attempts"] = attempts.clone();
            }
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(value) = self.request_id.as_deref().and_then(|id| HeaderValue::from_str(id).ok()) {
            response.headers_mut().insert("x-request-id", value);
        }
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}
