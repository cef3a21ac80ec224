//! `POST /v1/messages/count_tokens`: the prompt's `input_tokens`, counted as
//! the Messages route bills them (the crate docs' word arithmetic), so a
//! count equals the `input_tokens` of the answer to the same request. As
//! Anthropic does, it takes only the fields that make up the prompt: an
//! answer's own settings (`max_tokens`, `stream`, `temperature`, …) are
//! "Extra inputs".

use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{admit, errors, restate, validate};
use crate::Shared;
use crate::neutral;

const COUNT_FIELDS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "mcp_servers",
    "context_management",
    "output_config",
    "cache_control",
    "mock",
];

pub async fn count_tokens(State(app): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let request_id = format!("req_mock_{:06}", app.next_id());
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return errors::error(413, "Request exceeds the maximum allowed number of bytes.", &request_id);
    };
    if let Err(refused) = admit(&app, parts, &body, &request_id).await {
        return refused;
    }
    let mut request: Map<String, Value> = match serde_json::from_slice(&body) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return errors::invalid("Input should be a valid dictionary", &request_id),
        Err(e) => return errors::invalid(&format!("There was an error parsing the body: {e}"), &request_id),
    };
    if let Some(extra) = request.keys().find(|k| !COUNT_FIELDS.contains(&k.as_str())) {
        return errors::invalid(&format!("{extra}: Extra inputs are not permitted"), &request_id);
    }
    // The messages are checked as the Messages route checks them; the limit
    // it requires is no part of a count.
    request.insert("max_tokens".into(), json!(1));
    if let Err(message) = validate::request(&request) {
        return errors::invalid(&message, &request_id);
    }
    match neutral::decide(&restate::to_openai(&request)) {
        Ok(decision) => axum::Json(json!({"input_tokens": decision.prompt_tokens})).into_response(),
        Err(invalid) => errors::invalid(&invalid.message, &request_id),
    }
}
