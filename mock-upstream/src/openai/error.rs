//! OpenAI-shaped error answers: `{"error":{"message","type","code","param"}}`.

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Serialize)]
struct Envelope<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    code: Option<&'a str>,
    param: Option<&'a str>,
}

pub fn error_response(
    status: StatusCode,
    message: &str,
    kind: &str,
    code: Option<&str>,
    param: Option<&str>,
) -> Response {
    let body = serde_json::to_vec(&Envelope {
        error: ErrorBody {
            message,
            kind,
            code,
            param,
        },
    })
    .unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}

pub fn invalid_api_key() -> Response {
    error_response(
        StatusCode::UNAUTHORIZED,
        "Incorrect API key provided.",
        "invalid_request_error",
        Some("invalid_api_key"),
        None,
    )
}

/// The error a real provider would send for `status`, as scripted by a fault.
pub fn fault_response(status: StatusCode, code: Option<&str>, retry_after: Option<&str>) -> Response {
    let (kind, default_code, message) = match status.as_u16() {
        400 => (
            "invalid_request_error",
            "invalid_request_error",
            "mock: invalid request",
        ),
        401 => (
            "invalid_request_error",
            "invalid_api_key",
            "mock: incorrect API key provided",
        ),
        403 => ("permission_error", "permission_denied", "mock: permission denied"),
        404 => ("invalid_request_error", "model_not_found", "mock: model not found"),
        429 => ("rate_limit_error", "rate_limit_exceeded", "mock: rate limit exceeded"),
        503 => ("server_error", "overloaded", "mock: the engine is currently overloaded"),
        500..=599 => ("server_error", "server_error", "mock: internal server error"),
        _ => ("invalid_request_error", "mock_error", "mock: scripted error"),
    };
    let mut response = error_response(status, message, kind, Some(code.unwrap_or(default_code)), None);
    if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// Sent in place of the rest of a stream by `stream_error_after`.
pub fn stream_error_frame() -> Bytes {
    Bytes::from_static(
        b"data: {\"error\":{\"message\":\"rate limited\",\"type\":\"rate_limit_error\",\"code\":\"rate_limit_exceeded\"}}\n\n",
    )
}
