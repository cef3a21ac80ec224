//! Bedrock's error answers: `{"message": …}` with the error type in the
//! `x-amzn-ErrorType` header, as the AWS SDKs parse them.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The namespace suffix Bedrock puts after the type in `x-amzn-ErrorType`.
const ERROR_NAMESPACE: &str = "http://internal.amazon.com/coral/com.amazon.bedrock/";

/// A request id in AWS's UUID form, unique per answer of this mock.
pub fn request_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// An error answer of Bedrock type `kind`.
pub fn error(status: StatusCode, kind: &str, message: &str, request_id: &str) -> Response {
    let body = serde_json::json!({ "message": message }).to_string();
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format!("{kind}:{ERROR_NAMESPACE}")) {
        headers.insert("x-amzn-errortype", value);
    }
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert("x-amzn-requestid", value);
    }
    response
}

/// `400 ValidationException`.
pub fn validation(message: &str, request_id: &str) -> Response {
    error(StatusCode::BAD_REQUEST, "ValidationException", message, request_id)
}

/// The error Bedrock would send for `status`, as scripted by a fault
/// (`fail-<status>` or the `status` directive); `code` overrides the type.
pub fn fault(status: StatusCode, code: Option<&str>, retry_after: Option<&str>, request_id: &str) -> Response {
    let (kind, message) = match status.as_u16() {
        400 => ("ValidationException", "mock: invalid request"),
        401 => (
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ),
        403 => (
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        404 => (
            "ResourceNotFoundException",
            "Could not resolve the foundation model from the provided model identifier.",
        ),
        408 => (
            "ModelTimeoutException",
            "Model has timed out in processing the request.",
        ),
        424 => ("ModelErrorException", "The model returned an error."),
        429 => (
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        503 => (
            "ServiceUnavailableException",
            "Bedrock is unable to process your request.",
        ),
        500..=599 => ("InternalServerException", "Internal server error"),
        _ => ("ValidationException", "mock: scripted error"),
    };
    let mut response = error(status, code.unwrap_or(kind), message, request_id);
    if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}
