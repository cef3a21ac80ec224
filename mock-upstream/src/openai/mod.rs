//! The OpenAI chat-completions protocol: routes handlers to the shared
//! directive, fault and generation machinery.

pub(crate) mod answer;
pub(crate) mod error;
pub(crate) mod operations;
pub(crate) mod request;
mod response;

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use self::answer::Answer;
use self::request::ChatRequest;
use self::response::{Meta, Usage};
use futures_util::stream;

use crate::Shared;
use crate::directives::Directives;
use crate::faults::{Faults, StreamFault};
use crate::sse::{Playback, abort_after_flush};

/// Large enough for long conversations with big tool schemas.
pub(crate) const MAX_BODY: usize = 16 * 1024 * 1024;

const MODELS: &str = r#"{"object":"list","data":[{"id":"small","object":"model","created":0,"owned_by":"mock"},{"id":"medium","object":"model","created":0,"owned_by":"mock"},{"id":"large","object":"model","created":0,"owned_by":"mock"}]}"#;

/// `POST /v1/chat/completions`.
pub async fn chat_completions(State(app): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, MAX_BODY).await else {
        return error::error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "mock: request body too large or unreadable",
            "invalid_request_error",
            None,
            None,
        );
    };
    let authorized = app.authorized(&parts.headers);
    chat(app, parts, body.clone(), body, authorized).await
}

/// The chat handler once the body is read: `recorded` is the body as received,
/// `body` the one answered (Azure's deployment routes add `model` from the
/// URL), `authorized` the route's own credential check.
pub(crate) async fn chat(app: Shared, parts: Parts, recorded: Bytes, body: Bytes, authorized: bool) -> Response {
    // The recorder takes the request head by value: no header copies.
    app.count_chat_request();
    app.recorder.record(parts, recorded);
    sleep(app.latency()).await;
    if !authorized {
        return error::invalid_api_key();
    }
    let req: ChatRequest<'_> = match serde_json::from_slice(&body) {
        Ok(req) => req,
        Err(e) => {
            // Malformed JSON vs. well-formed JSON of the wrong shape (e.g. no
            // `model`), which OpenAI reports without a code.
            let (message, code) = if e.is_data() {
                (format!("Invalid request: {e}"), None)
            } else {
                let message = format!("We could not parse the JSON body of your request: {e}");
                (message, Some("invalid_json"))
            };
            return error::error_response(StatusCode::BAD_REQUEST, &message, "invalid_request_error", code, None);
        }
    };
    let no_directives = Directives::default();
    let directives = req.mock.as_ref().unwrap_or(&no_directives);
    let faults = Faults::resolve(directives, &req.model);
    sleep(faults.latency).await;
    if let Some(status) = app.outage() {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        return error::fault_response(status, None, None);
    }
    if let Some(status) = faults.status {
        let retry_after = directives.retry_after_header();
        return error::fault_response(status, directives.error_code.as_deref(), retry_after.as_deref());
    }

    let answer = match Answer::decide(&req, directives) {
        Ok(answer) => answer,
        Err(invalid) => {
            return error::error_response(
                StatusCode::BAD_REQUEST,
                &invalid.message,
                "invalid_request_error",
                None,
                Some(invalid.param),
            );
        }
    };
    let cached = match &app.prompt_cache {
        Some(cache) => Some(
            cache
                .read_and_write(&req.messages)
                .max(directives.cached_tokens.unwrap_or(0)),
        ),
        None => directives.cached_tokens,
    };
    let usage = Usage::new(req.prompt_tokens(), answer.completion_tokens()).cached(cached);
    let n = app.next_id();
    let meta = Meta {
        id: format!("chatcmpl-mock-{n}"),
        call_id: format!("call_mock_{n}"),
        created: unix_now(),
        model: &req.model,
    };
    if !req.streaming() {
        if faults.stream.cuts_whole_answer() {
            // Head sent, body aborted: the non-streaming form of a cut.
            return aborted_json();
        }
        return meta.completion(&answer, usage);
    }

    let mut frames = meta.stream_frames(&answer, usage, req.include_usage());
    let abort = match faults.stream {
        StreamFault::None => {
            frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
            false
        }
        StreamFault::CutAfter(n) => {
            frames.truncate(n);
            true
        }
        StreamFault::EndAfter(n) => {
            // Never the `finish_reason` chunk, nor the usage chunk after it.
            let before_finish = frames.len() - 1 - usize::from(req.include_usage());
            frames.truncate(n.min(before_finish));
            false
        }
        StreamFault::ErrorAfter(n) => {
            frames.truncate(n);
            frames.push(error::stream_error_frame());
            false
        }
    };
    Playback {
        frames,
        delay: faults.chunk_delay,
        abort,
    }
    .into_response()
}

/// `GET /v1/models`.
pub async fn models(State(app): State<Shared>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let authorized = app.authorized(&parts.headers);
    app.recorder.record(parts, Bytes::new());
    sleep(app.latency()).await;
    if !authorized {
        return error::invalid_api_key();
    }
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        MODELS,
    )
        .into_response()
}

/// A JSON response whose body fails before its first byte, so the server
/// drops the connection after the head.
fn aborted_json() -> Response {
    let cut = stream::once(async { Err::<Bytes, _>(abort_after_flush().await) });
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        Body::from_stream(cut),
    )
        .into_response()
}

async fn sleep(delay: std::time::Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
