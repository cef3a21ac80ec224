//! Google's error answers: `{"error": {"code", "message", "status",
//! "details"?}}` with the canonical status name for the HTTP code, as the
//! Gemini API (and the google-genai SDK's `APIError`) expect.

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The canonical Google status name of an HTTP code.
pub fn status_name(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// The error object (without the `{"error": …}` wrapper).
pub fn error_object(code: u16, status: &str, message: &str, details: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message, "status": status });
    if let Some(details) = details {
        error["details"] = details;
    }
    error
}

/// An error response with the status name of `status`.
pub fn error(status: StatusCode, message: &str) -> Response {
    respond(
        status,
        error_object(status.as_u16(), status_name(status.as_u16()), message, None),
    )
}

/// A 400 `INVALID_ARGUMENT`, as Gemini reports request validation failures.
pub fn invalid(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, message)
}

/// A 400 for a field Gemini's protobuf parser does not know, with the
/// `BadRequest` detail Google adds.
pub fn unknown_field(message: &str) -> Response {
    let details = json!([{
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [{ "description": message }],
    }]);
    respond(
        StatusCode::BAD_REQUEST,
        error_object(400, "INVALID_ARGUMENT", message, Some(details)),
    )
}

/// A key that is not the mock's: Google answers 400 with `API_KEY_INVALID`.
pub fn api_key_invalid() -> Response {
    let details = json!([
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": { "service": "generativelanguage.googleapis.com" },
        },
        {
            "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
            "locale": "en-US",
            "message": "API key not valid. Please pass a valid API key.",
        },
    ]);
    respond(
        StatusCode::BAD_REQUEST,
        error_object(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            Some(details),
        ),
    )
}

/// No key at all.
pub fn missing_key() -> Response {
    error(
        StatusCode::FORBIDDEN,
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    )
}

/// A bearer token where an API key was expected (Google reads it as OAuth).
pub fn bad_oauth_token() -> Response {
    error(
        StatusCode::UNAUTHORIZED,
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
    )
}

/// The `error_code` directive value that asks for Gemini's context-length error.
const CONTEXT_LENGTH_CODE: &str = "context_length_exceeded";

/// The error a scripted fault answers: Google's usual message for the status;
/// `error_code` overrides the status name (`context_length_exceeded` gives the
/// real "exceeds the maximum number of tokens" 400). A numeric `retry_after`
/// also becomes a `RetryInfo` detail, as Gemini's quota errors carry one.
pub fn fault(status: StatusCode, error_code: Option<&str>, retry_after: Option<&str>, prompt_tokens: u64) -> Response {
    let code = status.as_u16();
    let context_length = error_code == Some(CONTEXT_LENGTH_CODE);
    let message = match code {
        _ if context_length => format!(
            "The input token count ({}) exceeds the maximum number of tokens allowed (1048576).",
            prompt_tokens + 1_048_576
        ),
        400 => "Request contains an invalid argument.".to_owned(),
        401 => "Request had invalid authentication credentials.".to_owned(),
        403 => "The caller does not have permission".to_owned(),
        404 => "Requested entity was not found.".to_owned(),
        429 => "Resource has been exhausted (e.g. check quota).".to_owned(),
        500 => "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting".to_owned(),
        503 => "The model is overloaded. Please try again later.".to_owned(),
        504 => "Deadline expired before operation could complete.".to_owned(),
        _ => "mock: scripted error".to_owned(),
    };
    let status_text = match error_code {
        Some(CONTEXT_LENGTH_CODE) | None => status_name(code),
        Some(other) => other,
    };
    let details = retry_after
        .and_then(|r| r.trim().parse::<u64>().ok())
        .filter(|_| code == 429)
        .map(|seconds| {
            json!([{
                "@type": "type.googleapis.com/google.rpc.RetryInfo",
                "retryDelay": format!("{seconds}s"),
            }])
        });
    let mut response = respond(status, error_object(code, status_text, &message, details));
    if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The stream event that replaces the rest of a stream for
/// `stream_error_after` and `ratelimit-<n>`.
pub fn stream_error_event() -> Value {
    json!({ "error": error_object(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", None) })
}

fn respond(status: StatusCode, error: Value) -> Response {
    let body = Bytes::from(json!({ "error": error }).to_string());
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=UTF-8"),
        )],
        body,
    )
        .into_response()
}
