//! The Anthropic Messages API: `POST /v1/messages`, answering one `message`
//! or, with `"stream": true`, its SSE events (`event: <type>` lines).
//!
//! The key comes in `x-api-key`, or as `Authorization: Bearer <key>` as the
//! anthropic SDK 2.x sends it (a missing or wrong one is a 401
//! `authentication_error`), and the `anthropic-version` header is required.
//! The request is validated as Anthropic does (`validate`), restated in
//! OpenAI terms and answered by [`neutral::decide`] (`restate`), so the
//! reply text, tool input, token counts and model-name faults equal the
//! OpenAI route's; then rendered in Anthropic's shape (`render`). Errors use
//! `{"type":"error","error":{"type","message"}}` (`errors`); `ratelimit-<n>`
//! ends the stream with an `error` event. Stream faults count content deltas
//! as the OpenAI route counts content chunks: `cut-3` sends the preamble
//! (`message_start`, `content_block_start`, `ping`) and three deltas, then
//! drops the connection; `eof-3` sends the same, then ends the body cleanly
//! without `message_delta` or `message_stop`. With `thinking` enabled the
//! answer starts with a `thinking` block (`render`).

mod count;
mod errors;
mod render;
mod restate;
mod validate;

use axum::Router;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use serde_json::{Map, Value};

use self::render::{PREAMBLE, Rendered};
use crate::Shared;
use crate::faults::StreamFault;
use crate::neutral;
use crate::sse::{Playback, abort_after_flush};

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count::count_tokens))
}

/// `POST /v1/messages`.
async fn messages(State(app): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let request_id = format!("req_mock_{:06}", app.next_id());
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return errors::error(413, "Request exceeds the maximum allowed number of bytes.", &request_id);
    };
    app.count_chat_request();
    if let Err(refused) = admit(&app, parts, &body, &request_id).await {
        return refused;
    }
    let request: Map<String, Value> = match serde_json::from_slice(&body) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return errors::invalid("Input should be a valid dictionary", &request_id),
        Err(e) => return errors::invalid(&format!("There was an error parsing the body: {e}"), &request_id),
    };
    if let Err(message) = validate::request(&request) {
        return errors::invalid(&message, &request_id);
    }
    let decision = match neutral::decide(&restate::to_openai(&request)) {
        Ok(decision) => decision,
        Err(invalid) => return errors::invalid(&invalid.message, &request_id),
    };
    let faults = &decision.faults;
    sleep(faults.latency).await;
    if let Some(status) = faults.status {
        return errors::fault(
            status,
            decision.error_code.as_deref(),
            decision.retry_after.as_deref(),
            decision.prompt_tokens,
            &request_id,
        );
    }
    let number = app.next_id();
    let rendered = Rendered {
        decision: &decision,
        model: request.get("model").and_then(Value::as_str).unwrap_or(""),
        id: format!("msg_mock_{number:06}"),
        tool_id: format!("toolu_mock_{number:06}"),
        stop_sequences: request
            .get("stop_sequences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
        max_tokens: request.get("max_tokens").and_then(Value::as_u64).unwrap_or(u64::MAX),
        thinking: thinking(&request, &decision),
    };
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let with_id = |mut response: Response| {
        if let Ok(id) = HeaderValue::from_str(&request_id) {
            response.headers_mut().insert("request-id", id);
        }
        response
    };
    if !streaming {
        if faults.stream.cuts_whole_answer() {
            return aborted_json();
        }
        let body = Bytes::from(rendered.whole().to_string());
        return with_id(
            (
                [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
                body,
            )
                .into_response(),
        );
    }
    let mut events = rendered.events();
    // The OpenAI route's counts include its role chunk; here the preamble.
    let (abort, error) = match faults.stream {
        StreamFault::None => (false, false),
        StreamFault::CutAfter(n) => {
            events.truncate(PREAMBLE + n.saturating_sub(1));
            (true, false)
        }
        StreamFault::ErrorAfter(n) => {
            events.truncate(PREAMBLE + n.saturating_sub(1));
            (false, true)
        }
        StreamFault::EndAfter(n) => {
            // Never `message_delta` (the stop reason) nor `message_stop`.
            let closing = events
                .iter()
                .position(|(name, _)| *name == "message_delta")
                .unwrap_or(events.len());
            events.truncate((PREAMBLE + n.saturating_sub(1)).min(closing));
            (false, false)
        }
    };
    if error {
        events.push(("error", errors::stream_error_event(&request_id)));
    }
    with_id(
        Playback {
            frames: events
                .iter()
                .map(|(name, data)| render::sse_frame(name, data))
                .collect(),
            delay: faults.chunk_delay,
            abort,
        }
        .into_response(),
    )
}

/// Records the request and checks what every Messages route checks first:
/// the key (401) and the `anthropic-version` header (400).
async fn admit(
    app: &Shared,
    parts: axum::http::request::Parts,
    body: &Bytes,
    request_id: &str,
) -> Result<(), Response> {
    let key = parts.headers.get("x-api-key").map(|v| v.as_bytes().to_vec());
    // The anthropic SDK (2.x) sends an API key as a bearer token.
    let bearer = parts.headers.contains_key(header::AUTHORIZATION);
    let key_ok = match (&key, bearer) {
        (Some(key), _) => app.key_matches(Some(key)),
        (None, true) => app.authorized(&parts.headers),
        (None, false) => app.key_matches(None),
    };
    let has_version = parts.headers.contains_key("anthropic-version");
    app.recorder.record(parts, body.clone());
    sleep(app.latency()).await;
    if !key_ok {
        let message = if key.is_some() || bearer {
            "invalid x-api-key"
        } else {
            "x-api-key header is required"
        };
        return Err(errors::error(401, message, request_id));
    }
    if !has_version {
        return Err(errors::invalid("anthropic-version: header is required", request_id));
    }
    Ok(())
}

/// The reasoning of an answer with `thinking` enabled (`validate` has
/// checked its budget): it restates the last user text.
fn thinking(request: &Map<String, Value>, decision: &neutral::Decision) -> Option<String> {
    let enabled = request
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled");
    enabled.then(|| {
        format!(
            "Thinking it over: the answer is {} tokens long.",
            decision.completion_tokens
        )
    })
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
