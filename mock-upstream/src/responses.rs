//! OpenAI's Responses API: `POST /v1/responses` (and `/responses`), one JSON
//! `response` object, or with `"stream": true` its named SSE events from
//! `response.created` to `response.completed`.
//!
//! The request is checked as OpenAI checks it (`restate`: unknown fields and
//! chat-completions fields such as `messages` or `max_tokens` are a 400
//! naming the parameter; input items must be messages, `function_call` or
//! `function_call_output`), restated in chat-completions terms and answered
//! by [`neutral::decide`], so the reply text, tool-call arguments, token
//! counts and faults equal the chat route's. `max_output_tokens` cuts the
//! reply to that many words and makes the response `incomplete`. The answer
//! is rendered in the Responses shape (`render`); errors are OpenAI's
//! `{"error": …}`. Stream faults count the content events after
//! `response.created`, `response.in_progress` and the first
//! `response.output_item.added`, as the chat route counts chunks after its
//! role chunk; `stream_error_after` ends with an `error` event.

mod render;
mod restate;

use axum::Router;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use serde_json::{Map, Value};

use self::render::Rendered;
use crate::Shared;
use crate::neutral;
use crate::openai::error::{error_response, fault_response, invalid_api_key};
use crate::sse::{Playback, abort_after_flush};

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/responses", post(create))
        .route("/responses", post(create))
}

fn invalid(message: &str, param: Option<&str>) -> Response {
    error_response(StatusCode::BAD_REQUEST, message, "invalid_request_error", None, param)
}

/// `POST /v1/responses`.
async fn create(State(app): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return invalid("request body is too large", None);
    };
    app.count_chat_request();
    let authorized = app.authorized(&parts.headers);
    app.recorder.record(parts, body.clone());
    sleep(app.latency()).await;
    if !authorized {
        return invalid_api_key();
    }
    let request: Map<String, Value> = match serde_json::from_slice(&body) {
        Ok(Value::Object(map)) => map,
        _ => return invalid("We could not parse the JSON body of your request.", None),
    };
    let chat = match restate::to_chat(&request) {
        Ok(chat) => chat,
        Err(refusal) => return invalid(&refusal.message, Some(&refusal.param)),
    };
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let decision = match neutral::decide(&chat) {
        Ok(decision) => decision,
        Err(refusal) => return invalid(&refusal.message, Some(refusal.param)),
    };
    let faults = &decision.faults;
    sleep(faults.latency).await;
    if let Some(status) = faults.status {
        return fault_response(status, decision.error_code.as_deref(), decision.retry_after.as_deref());
    }
    let n = app.next_id();
    let rendered = Rendered::new(
        &decision,
        n,
        request.get("model").and_then(Value::as_str).unwrap_or(""),
        request.get("max_output_tokens").and_then(Value::as_u64),
    );
    if !streaming {
        if faults.stream.cuts_whole_answer() {
            let cut = stream::once(async { Err::<Bytes, _>(abort_after_flush().await) });
            return ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(cut)).into_response();
        }
        return (
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            rendered.whole().to_string(),
        )
            .into_response();
    }
    let (mut events, opening) = rendered.events();
    let cut = faults.stream.cut(&mut events, opening);
    if cut.error {
        events.push(render::rate_limited_event());
    }
    Playback {
        frames: events.iter().map(render::sse_frame).collect(),
        delay: faults.chunk_delay,
        abort: cut.abort,
    }
    .into_response()
}

async fn sleep(delay: std::time::Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}
