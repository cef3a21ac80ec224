//! API errors in the OpenAI shape:
//! `{"error": {"message", "type", "code", "param"}, "service": {"request_id"}}`.
//! Every failure a caller can see goes through [`ApiError`], so statuses and
//! bodies stay consistent (see docs/errors.md).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What failed, for the decisions fallback and provider health make. Codes are
/// for callers; decisions read this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The caller's request or account. Another candidate would fail the same way.
    Request,
    /// The upstream rate-limited this model. Try the next candidate, and hold
    /// this model back for its `Retry-After`, but do not call it unhealthy.
    RateLimited,
    /// The upstream failed: 5xx, overload, unreachable, timeout, a broken
    /// stream. Counts against the model's health.
    Upstream,
    /// The upstream said it is overloaded (Anthropic's 529, an overloaded
    /// error): an upstream failure that clients name apart.
    Overloaded,
    /// The adapter trapped, ran out of time or memory, broke an egress rule or
    /// gave output the host cannot use. Counts against the model's health.
    Adapter,
    /// This candidate cannot serve now (not configured, breaker open, the
    /// upstream refused our credentials): try the next one.
    Unavailable,
    /// The gateway itself.
    Internal,
}

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
    /// `Retry-After`, in seconds, sent with a 429 or 503: the upstream's when
    /// it rate-limited us, or the gateway's own when it refused the request.
    pub retry_after: Option<u32>,
    pub failure: Failure,
    /// RFC 6750's `error` for the `WWW-Authenticate` challenge of a 401:
    /// `invalid_token` when a key was sent and refused, none when none was.
    pub bearer_error: Option<&'static str>,
    /// Not logged: an expected refusal under load (shedding, shutdown), which
    /// would flood the log exactly when it matters; metrics count them.
    pub quiet: bool,
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
            bearer_error: None,
            quiet: false,
            failure: if status.is_server_error() {
                Failure::Internal
            } else {
                Failure::Request
            },
        }
    }

    pub fn failing(mut self, failure: Failure) -> Self {
        self.failure = failure;
        self
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
        matches!(
            self.failure,
            Failure::RateLimited | Failure::Upstream | Failure::Overloaded | Failure::Adapter | Failure::Unavailable
        )
    }

    /// Whether this failure counts against the model's health.
    pub fn is_health_failure(&self) -> bool {
        matches!(self.failure, Failure::Upstream | Failure::Overloaded | Failure::Adapter)
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

    /// A key (or session) was sent and refused: unknown, revoked, malformed or
    /// expired. The challenge says `error="invalid_token"` (RFC 6750 §3.1).
    pub fn invalid_token(message: impl Into<String>) -> Self {
        let mut error = Self::unauthorized(message);
        error.bearer_error = Some("invalid_token");
        error
    }

    /// A console session's call without its `X-CSRF-Token` (or with a wrong one).
    pub fn csrf_failed() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "csrf_failed",
            "A call authenticated by the console session cookie must send the session's X-CSRF-Token header.",
        )
    }

    /// A refused console sign-in (bad OIDC state, token or callback).
    pub fn sign_in_failed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "sign_in_failed",
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

    /// The request's headers or body did not arrive in time
    /// (`server.header_read_timeout_ms`, `server.body_idle_timeout_ms`,
    /// `server.body_timeout_ms`).
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "request_timeout",
            message,
        )
    }

    /// The gateway refused the request or connection without starting it:
    /// overloaded (`code` says which limit) or shutting down.
    pub fn refused(code: &'static str, message: impl Into<String>, retry_after: u32) -> Self {
        let mut error = Self::new(StatusCode::SERVICE_UNAVAILABLE, "api_error", code, message);
        error.retry_after = Some(retry_after);
        error.quiet = true;
        error
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "internal_error",
            message,
        )
    }

    /// The host refused what the adapter asked for (an origin, a credential
    /// slot, a malformed request or chunk). Nothing was sent for it.
    pub fn adapter_refused(adapter: &str, what: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "adapter_failed",
            format!("adapter '{adapter}': {what}"),
        )
        .failing(Failure::Adapter)
    }

    pub fn upstream_unreachable(provider: &str, detail: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "upstream_unreachable",
            format!("provider '{provider}' could not be reached: {detail}"),
        )
        .failing(Failure::Upstream)
    }

    pub fn upstream_timeout(provider: &str, what: &str) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout_error",
            "upstream_timeout",
            format!("provider '{provider}' timed out {what}"),
        )
        .failing(Failure::Upstream)
    }

    /// The upstream asked us to slow down. The caller gets the 429 (with the
    /// upstream's `Retry-After`) when no other candidate could answer.
    pub fn upstream_rate_limited(provider: &str, detail: &str) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "upstream_rate_limited",
            format!("provider '{provider}' is rate limiting: {detail}"),
        )
        .failing(Failure::RateLimited)
    }

    /// The `error` object alone, as also used inside a final stream chunk.
    pub fn error_object(&self) -> serde_json::Value {
        json!({ "message": self.message, "type": self.kind, "code": self.code, "param": self.param })
    }

    /// 429: the caller's own request rate is over its limit; `retry_after`
    /// (seconds) tells when to try again.
    /// The caller's key is over its request rate (not an upstream's limit).
    pub fn key_rate_limited(message: impl Into<String>, retry_after: u32) -> Self {
        let mut error = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "rate_limit_exceeded",
            message,
        );
        error.retry_after = Some(retry_after);
        error
    }

    /// The whole error body: `error`, and `service` when there is a request id.
    pub fn body(&self) -> serde_json::Value {
        let mut body = json!({ "error": self.error_object() });
        if let Some(id) = &self.request_id {
            body["service"] = json!({ "request_id": id });
            if let Some(attempts) = &self.attempts {
                body["service"]["attempts"] = attempts.clone();
            }
        }
        body
    }

    /// A whole HTTP/1.1 response that closes the connection, for answers
    /// written straight to a socket, outside the router (a refused connection,
    /// headers that never finished).
    pub fn to_http1_bytes(&self) -> Vec<u8> {
        let body = self.body().to_string();
        let mut head = format!(
            "HTTP/1.1 {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n",
            self.status,
            body.len()
        );
        if let Some(id) = &self.request_id {
            head.push_str(&format!("x-request-id: {id}\r\n"));
        }
        if let Some(secs) = self.retry_after {
            head.push_str(&format!("retry-after: {secs}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() && !self.quiet {
            tracing::warn!(status = %self.status, code = self.code, request_id = ?self.request_id, "{}", self.message);
        }
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(value) = self.request_id.as_deref().and_then(|id| HeaderValue::from_str(id).ok()) {
            response.headers_mut().insert("x-request-id", value);
        }
        self.set_headers(response.headers_mut());
        response
    }
}

impl ApiError {
    /// The headers every error answer carries, whatever the body's dialect:
    /// `Cache-Control: no-store`, the `WWW-Authenticate` challenge on a 401,
    /// and `Retry-After` on a 429 or 503 that has one.
    pub fn set_headers(&self, headers: &mut axum::http::HeaderMap) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, bearer_challenge(self.bearer_error));
        }
        if matches!(
            self.status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        ) && let Some(secs) = self.retry_after
        {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
    }
}

/// The `WWW-Authenticate` value every 401 carries (RFC 9110 §11.6.1, RFC 6750
/// §3): `Bearer realm="tollgate"`, with `error="…"` when a credential was sent
/// and refused.
pub fn bearer_challenge(error: Option<&str>) -> HeaderValue {
    let value = match error {
        None => "Bearer realm=\"tollgate\"".to_string(),
        Some(error) => format!("Bearer realm=\"tollgate\", error=\"{error}\""),
    };
    HeaderValue::from_str(&value).expect("a challenge is ASCII")
}
