//! Answers in Stripe's shape: JSON with a `Request-Id` header (the SDKs put
//! it on their exceptions), errors as `{"error": {"type", "message", …}}` with
//! the status the SDKs map to their exception classes (400 →
//! `InvalidRequestError`, 401 → `AuthenticationError`, 404 → also
//! `InvalidRequestError`, `idempotency_error` → `IdempotencyError`).

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::objects::random_id;

/// A parameter error: what is wrong and which parameter (`line_items[0][quantity]`).
#[derive(Debug)]
pub(crate) struct ParamError {
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ParamError {
    pub fn new(message: impl Into<String>, param: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            param: Some(param.into()),
            code: None,
        }
    }

    pub fn missing(param: &str) -> Self {
        let mut error = Self::new(format!("Missing required param: {param}."), param);
        error.code = Some("parameter_missing");
        error
    }

    pub fn unknown(param: &str) -> Self {
        let mut error = Self::new(format!("Received unknown parameter: {param}"), param);
        error.code = Some("parameter_unknown");
        error
    }

    pub fn into_response(self) -> Response {
        let mut error = Map::new();
        error.insert("type".into(), "invalid_request_error".into());
        error.insert("message".into(), self.message.into());
        if let Some(param) = self.param {
            error.insert("param".into(), param.into());
        }
        if let Some(code) = self.code {
            error.insert("code".into(), code.into());
        }
        json_response(StatusCode::BAD_REQUEST, json!({ "error": error }).to_string().into())
    }
}

/// A JSON answer with a fresh `Request-Id`.
pub(crate) fn json_response(status: StatusCode, body: Bytes) -> Response {
    let request_id = HeaderValue::from_str(&random_id("req_", 14)).expect("ids are ASCII");
    (
        status,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::HeaderName::from_static("request-id"), request_id),
        ],
        body,
    )
        .into_response()
}

pub(crate) fn object_response(object: &Value) -> Response {
    json_response(StatusCode::OK, object.to_string().into())
}

/// 401 as Stripe words it for a missing and for a malformed key.
pub(crate) fn unauthorized(presented: Option<&str>) -> Response {
    let message = match presented {
        None => "You did not provide an API key. You need to provide your API key in the Authorization header, \
                 using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."
            .to_owned(),
        Some(key) => format!("Invalid API Key provided: {}", redact(key)),
    };
    let body = json!({"error": {"type": "invalid_request_error", "message": message}});
    json_response(StatusCode::UNAUTHORIZED, body.to_string().into())
}

/// Stripe shows keys as `sk_test_****abcd`.
fn redact(key: &str) -> String {
    let tail: String = key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{}****{tail}", key.chars().take(8).collect::<String>())
}

/// 404 for an id the store does not hold.
pub(crate) fn missing(kind: &str, id: &str) -> Response {
    let body = json!({"error": {
        "type": "invalid_request_error",
        "code": "resource_missing",
        "param": "id",
        "message": format!("No such {kind}: '{id}'"),
    }});
    json_response(StatusCode::NOT_FOUND, body.to_string().into())
}

/// The same `Idempotency-Key` sent with different parameters.
pub(crate) fn idempotency_mismatch(key: &str) -> Response {
    let body = json!({"error": {
        "type": "idempotency_error",
        "message": format!(
            "Keys for idempotent requests can only be used with the same parameters they were first used with. \
             Try using a key other than '{key}' if you meant to execute a different request."
        ),
    }});
    json_response(StatusCode::BAD_REQUEST, body.to_string().into())
}

/// Errors of the `/__stripe/` test controls: `{"error": {"message"}}`.
pub(crate) fn control(status: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({"error": {"type": "invalid_request_error", "message": message.into()}});
    json_response(status, body.to_string().into())
}
