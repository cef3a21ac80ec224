//! Cohere's error answers: `{"id": "<uuid>", "message": "…"}` with the HTTP
//! status carrying the kind, as the cohere SDK (which raises
//! `TooManyRequestsError`, `UnauthorizedError`, … by status) expects.

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The `error_code` directive value that asks for Cohere's context-length error.
const CONTEXT_LENGTH_CODE: &str = "context_length_exceeded";
/// The context window the scripted context-length error reports.
const CONTEXT_WINDOW: u64 = 256_000;

/// An error answer with `status` and `message`.
pub fn error(status: StatusCode, message: &str) -> Response {
    let body = Bytes::from(json!({ "id": error_id(status, message), "message": message }).to_string());
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}

/// A 400 with Cohere's `invalid request: …` wording.
pub fn invalid(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, &format!("invalid request: {message}"))
}

/// No `Authorization` header.
pub fn missing_key() -> Response {
    error(StatusCode::UNAUTHORIZED, "no api key supplied")
}

/// A token that is not the mock's.
pub fn invalid_key() -> Response {
    error(StatusCode::UNAUTHORIZED, "invalid api token")
}

/// The message Cohere sends with a 429, also used for the in-stream error.
pub const RATE_LIMITED: &str =
    "too many requests: you are past the per minute request limit, please wait and try again later";

/// The error a scripted fault answers: Cohere's usual message for the status;
/// `error_code: context_length_exceeded` gives the real "too many tokens" 400.
pub fn fault(status: StatusCode, error_code: Option<&str>, retry_after: Option<&str>, prompt_tokens: u64) -> Response {
    let message = match status.as_u16() {
        _ if error_code == Some(CONTEXT_LENGTH_CODE) => format!(
            "too many tokens: total number of tokens in the prompt cannot exceed {CONTEXT_WINDOW} - received {}. Try using a shorter message.",
            prompt_tokens + CONTEXT_WINDOW
        ),
        400 => "invalid request: the request could not be processed".to_owned(),
        401 => "invalid api token".to_owned(),
        402 => "Please add or update your payment method to continue using the API".to_owned(),
        403 => "forbidden: this key cannot use the requested model".to_owned(),
        404 => {
            "model not found, make sure the correct model ID was used and that you have access to the model.".to_owned()
        }
        422 => "unprocessable entity: the request could not be processed".to_owned(),
        429 => RATE_LIMITED.to_owned(),
        498 => "blocked api token".to_owned(),
        499 => "client closed request".to_owned(),
        500 => "internal server error, this has been reported to our developers".to_owned(),
        503 => "service unavailable: the model is overloaded, please try again later".to_owned(),
        504 => "gateway timeout".to_owned(),
        _ => "mock: scripted error".to_owned(),
    };
    let mut response = error(status, &message);
    if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// A stable, UUID-shaped id for an error (Cohere puts a request id there).
fn error_id(status: StatusCode, message: &str) -> String {
    // FNV-1a: deterministic without a random source.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in message.bytes().chain(status.as_u16().to_be_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let hex = format!("{hash:016x}{:016x}", hash.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
