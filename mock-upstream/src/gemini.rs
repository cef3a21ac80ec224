//! The Gemini API (Google AI Studio):
//! `POST /v1beta/models/{model}:generateContent` (one JSON answer) and
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (SSE, each
//! event a whole `GenerateContentResponse` with the new parts; without
//! `alt=sse`, one JSON array). `/v1/models/…` answers the same, as Google
//! serves both versions (the google-genai SDK defaults to `v1`).
//!
//! axum cannot split `{model}:{action}` inside one path segment, so the route
//! takes the tail and splits it here; an unknown action (or a model path with
//! more segments) is Google's 404 `NOT_FOUND`.
//!
//! The request is validated as Gemini does (`normalize`: proto field names in
//! snake_case or camelCase; `validate`: unknown fields are rejected, required
//! fields checked), restated in OpenAI terms and answered
//! by [`neutral::decide`] (`restate`), so the reply text, function-call
//! arguments, token counts and model-name faults equal the OpenAI route's.
//! The answer is rendered in Gemini's shape (`render`); errors use Google's
//! `{"error": {"code", "message", "status"}}` (`errors`), a
//! `RESOURCE_EXHAUSTED` error event mid-stream for `ratelimit-<n>`.
//! Stream faults count Gemini events as the OpenAI route counts content
//! chunks: `cut-3` sends three events, then drops the connection; `eof-3`
//! sends them, then ends the body cleanly with no `finishReason` seen.
//!
//! With `--api-key`, the key must come in `x-goog-api-key` (or `?key=`): none
//! is a 403 `PERMISSION_DENIED`, a wrong one a 400 `API_KEY_INVALID`, a
//! bearer token a 401 `UNAUTHENTICATED`.

mod errors;
mod normalize;
mod render;
mod restate;
mod validate;

use axum::Router;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use serde_json::{Map, Value};

use self::render::Rendered;
use self::validate::Rejection;
use crate::Shared;

mod operations;
use crate::faults::StreamFault;
use crate::neutral;
use crate::sse::{Playback, abort_after_flush};

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1beta/models/{*rest}", post(generate))
        .route("/v1/models/{*rest}", post(generate))
}

/// `POST /{version}/models/{model}:{action}`.
async fn generate(State(app): State<Shared>, Path(rest): Path<String>, request: Request) -> Response {
    let version = request
        .uri()
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("v1beta")
        .to_owned();
    let (model, action) = rest.rsplit_once(':').unwrap_or((rest.as_str(), ""));
    let streaming = match action {
        "generateContent" => false,
        "streamGenerateContent" => true,
        "batchEmbedContents" | "predict" => {
            let (parts, body) = request.into_parts();
            let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
                return errors::invalid("Request payload size exceeds the limit.");
            };
            app.count_chat_request();
            let rejection = key_rejection(&app, &parts);
            app.recorder.record(parts, body.clone());
            sleep(app.latency()).await;
            if let Some(rejection) = rejection {
                return rejection;
            }
            return operations::answer(model, action, &body);
        }
        _ => return not_found(model, action, &version),
    };
    if model.is_empty() || model.contains('/') {
        return not_found(model, action, &version);
    }
    let model = model.to_owned();
    let sse = query_param(request.uri().query(), "alt") == Some("sse");
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return errors::invalid("Request payload size exceeds the limit.");
    };
    app.count_chat_request();
    let rejection = key_rejection(&app, &parts);
    app.recorder.record(parts, body.clone());
    sleep(app.latency()).await;
    if let Some(rejection) = rejection {
        return rejection;
    }
    let request: Map<String, Value> = match serde_json::from_slice(&body) {
        Ok(Value::Object(map)) => normalize::camel_case(map),
        Ok(_) => return errors::invalid("Invalid JSON payload received. Expected an object."),
        Err(e) => return errors::invalid(&format!("Invalid JSON payload received. {e}")),
    };
    match validate::request(&request) {
        Ok(()) => {}
        Err(Rejection::UnknownField(message)) => return errors::unknown_field(&message),
        Err(Rejection::Invalid(message)) => return errors::invalid(&message),
    }
    let decision = match neutral::decide(&restate::to_openai(&model, &request)) {
        Ok(decision) => decision,
        Err(invalid) => return errors::invalid(&invalid.message),
    };
    let faults = &decision.faults;
    sleep(faults.latency).await;
    if let Some(status) = faults.status {
        return errors::fault(
            status,
            decision.error_code.as_deref(),
            decision.retry_after.as_deref(),
            decision.prompt_tokens,
        );
    }
    let rendered = Rendered {
        decision: &decision,
        model: &model,
        response_id: format!("mock-gemini-{}", app.next_id()),
    };
    if !streaming {
        if faults.stream.cuts_whole_answer() {
            return aborted_json();
        }
        return json_response(rendered.whole().to_string().into());
    }
    let mut events = rendered.events();
    // The OpenAI route's counts include its role chunk; Gemini has none.
    let (abort, error) = match faults.stream {
        StreamFault::None => (false, false),
        StreamFault::CutAfter(n) => {
            events.truncate(n.saturating_sub(1));
            (true, false)
        }
        StreamFault::ErrorAfter(n) => {
            events.truncate(n.saturating_sub(1));
            (false, true)
        }
        StreamFault::EndAfter(n) => {
            // Never the event that carries `finishReason`.
            let finishing = events
                .iter()
                .position(|event| event["candidates"][0].get("finishReason").is_some())
                .unwrap_or(events.len());
            events.truncate(n.saturating_sub(1).min(finishing));
            (false, false)
        }
    };
    if error {
        events.push(errors::stream_error_event());
    }
    if !sse {
        if abort {
            return aborted_json();
        }
        return json_response(render::json_array(&events));
    }
    Playback {
        frames: events.iter().map(render::sse_frame).collect(),
        delay: faults.chunk_delay,
        abort,
    }
    .into_response()
}

/// The key check described in the module docs: the error answer, if the key is wrong.
fn key_rejection(app: &Shared, parts: &Parts) -> Option<Response> {
    let presented = parts
        .headers
        .get("x-goog-api-key")
        .map(|v| v.as_bytes())
        .or_else(|| query_param(parts.uri.query(), "key").map(str::as_bytes));
    if app.key_matches(presented) {
        return None;
    }
    Some(match presented {
        Some(_) => errors::api_key_invalid(),
        None if parts.headers.contains_key(header::AUTHORIZATION) => errors::bad_oauth_token(),
        None => errors::missing_key(),
    })
}

fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn not_found(model: &str, action: &str, version: &str) -> Response {
    errors::error(
        StatusCode::NOT_FOUND,
        &format!(
            "models/{model} is not found for API version {version}, or is not supported for {action}. Call ListModels to see the list of available models and their supported methods."
        ),
    )
}

fn json_response(body: Bytes) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=UTF-8"),
        )],
        body,
    )
        .into_response()
}

/// Head sent, body aborted: the non-streaming form of a cut.
fn aborted_json() -> Response {
    let cut = stream::once(async { Err::<Bytes, _>(abort_after_flush().await) });
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(cut)).into_response()
}

async fn sleep(delay: std::time::Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}
