//! Anthropic's error answers: `{"type": "error", "error": {"type",
//! "message"}, "request_id"}` with a `request-id` header, as the anthropic
//! SDK's typed exceptions expect (the class comes from the status).

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The error `type` Anthropic uses for an HTTP status.
pub fn type_for(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 | 503 => "overloaded_error",
        _ => "api_error",
    }
}

/// The error body.
pub fn body(kind: &str, message: &str, request_id: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id})
}

/// An error answer of `status`, typed after it.
pub fn error(status: u16, message: &str, request_id: &str) -> Response {
    respond(status, body(type_for(status), message, request_id), request_id)
}

/// 400 `invalid_request_error`, as Anthropic reports validation failures.
pub fn invalid(message: &str, request_id: &str) -> Response {
    error(400, message, request_id)
}

/// The `error_code` directive value that asks for the context-length error.
const CONTEXT_LENGTH_CODE: &str = "context_length_exceeded";

/// The error a scripted fault answers, with Anthropic's usual message for
/// the status; `error_code: context_length_exceeded` gives the real "prompt
/// is too long" 400.
pub fn fault(
    status: StatusCode,
    error_code: Option<&str>,
    retry_after: Option<&str>,
    prompt_tokens: u64,
    request_id: &str,
) -> Response {
    let code = status.as_u16();
    if error_code == Some(CONTEXT_LENGTH_CODE) {
        let message = format!(
            "prompt is too long: {} tokens > 200000 maximum",
            prompt_tokens + 200_000
        );
        return invalid(&message, request_id);
    }
    let message = match code {
        400 => "Invalid request.",
        401 => "invalid x-api-key",
        403 => "Your API key does not have permission to use the specified resource.",
        404 => "The requested resource could not be found.",
        413 => "Request exceeds the maximum allowed number of bytes.",
        429 => "Number of request tokens has exceeded your per-minute rate limit.",
        500 => "Internal server error",
        529 | 503 => "Overloaded",
        _ => "mock: scripted error",
    };
    let kind = error_code.unwrap_or(type_for(code));
    let mut response = respond(code, body(kind, message, request_id), request_id);
    if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The `error` event that ends a stream for `stream_error_after` and
/// `ratelimit-<n>`.
pub fn stream_error_event(request_id: &str) -> Value {
    body(
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit.",
        request_id,
    )
}

fn respond(status: u16, body: Value, request_id: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        Bytes::from(body.to_string()),
    )
        .into_response();
    if let Ok(id) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert("request-id", id);
    }
    response
}
