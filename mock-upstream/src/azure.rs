//! Azure OpenAI's deployment route:
//! `POST /openai/deployments/{deployment}/chat/completions?api-version=…` with
//! the key in an `api-key` header. Azure speaks the OpenAI protocol, so the
//! OpenAI handler answers, taking the model from the URL; the recorder keeps
//! the body as sent.

use axum::body::{Bytes, to_bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::Shared;

/// `POST /openai/deployments/{deployment}/chat/completions`.
pub async fn chat_completions(State(app): State<Shared>, Path(deployment): Path<String>, request: Request) -> Response {
    let has_version = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .any(|pair| pair.strip_prefix("api-version=").is_some_and(|v| !v.is_empty()));
    if !has_version {
        return azure_error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return azure_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestTooLarge",
            "mock: request body too large or unreadable",
        );
    };
    let authorized = api_key_matches(&app, &parts.headers);
    let answered = with_model(&body, &deployment);
    crate::openai::chat(app, parts, body, answered, authorized).await
}

/// Azure's key check: `api-key: <key>` instead of a bearer token.
fn api_key_matches(app: &Shared, headers: &HeaderMap) -> bool {
    match &app.expected_auth {
        None => true,
        Some(expected) => {
            let key = expected.strip_prefix(b"Bearer ").unwrap_or(expected);
            headers.get("api-key").is_some_and(|v| v.as_bytes() == key)
        }
    }
}

/// The body with `model` set to the deployment; a body that is not a JSON
/// object is left for the OpenAI handler to reject.
fn with_model(body: &Bytes, deployment: &str) -> Bytes {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut object)) => {
            object.insert("model".into(), Value::String(deployment.to_owned()));
            Bytes::from(Value::Object(object).to_string())
        }
        _ => body.clone(),
    }
}

/// Azure's own error shape for errors raised before the OpenAI handler runs.
fn azure_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({ "error": { "code": code, "message": message } }).to_string();
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}

/// `POST /openai/deployments/{deployment}/{embeddings|images/generations|audio/speech}`:
/// checked as Azure checks (api-version, `api-key`), then answered by the
/// OpenAI handler with the deployment as the model.
pub async fn operation(
    State(app): State<Shared>,
    Path((deployment, path)): Path<(String, String)>,
    request: Request,
) -> Response {
    let has_version = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .any(|pair| pair.strip_prefix("api-version=").is_some_and(|v| !v.is_empty()));
    if !has_version {
        return azure_error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let (mut parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return azure_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestTooLarge",
            "mock: request body too large",
        );
    };
    if !api_key_matches(&app, &parts.headers) {
        return azure_error(
            StatusCode::UNAUTHORIZED,
            "401",
            "Access denied due to invalid subscription key.",
        );
    }
    // The OpenAI handler checks a bearer token: the Azure key stands for it.
    if let Some(expected) = &app.expected_auth
        && let Ok(value) = HeaderValue::from_bytes(expected)
    {
        parts.headers.insert(header::AUTHORIZATION, value);
    }
    let request = Request::from_parts(parts, axum::body::Body::from(with_model(&body, &deployment)));
    let state = State(app);
    match path.as_str() {
        "embeddings" => crate::openai::operations::embeddings(state, request).await,
        "images/generations" => crate::openai::operations::image_generations(state, request).await,
        "audio/speech" => crate::openai::operations::speech(state, request).await,
        other => azure_error(
            StatusCode::NOT_FOUND,
            "404",
            &format!("mock: no deployment route '{other}'"),
        ),
    }
}
