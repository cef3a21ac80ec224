//! The Cohere v2 Chat API: `POST /v2/chat`, one JSON answer, or with
//! `"stream": true` SSE events (`event: <type>` + `data: {"type": …}`) from
//! `message-start` to `message-end`.
//!
//! The request is validated as Cohere does (`validate`: unknown fields,
//! message shapes, parameter ranges; a 400 `{"id", "message": "invalid
//! request: …"}`), restated in OpenAI terms and answered by
//! [`neutral::decide`] (`restate`), so the reply text, tool-call arguments,
//! token counts and model-name faults equal the OpenAI route's. The answer is
//! cut by `stop_sequences` and `max_tokens` as Cohere cuts it (`limits`) and
//! rendered in Cohere's shape (`render`); errors are Cohere's `{"id",
//! "message"}` with the status the SDK maps to its typed exceptions
//! (`errors`). Mid-stream failures (`ratelimit-<n>`, `stream_error_after`)
//! end with a `message-end` whose `delta.error` says what went wrong and whose
//! `finish_reason` is `ERROR`, as Cohere reports them. Stream faults count
//! content events after `message-start` and the first `content-start` /
//! `tool-call-start` as the OpenAI route counts chunks after its role chunk:
//! `cut-3` sends three deltas, then drops the connection; `eof-3` sends them,
//! then ends the body cleanly without `message-end`.
//!
//! With `--api-key`, the key must come as `Authorization: Bearer <key>`: none
//! is a 401 "no api key supplied", a wrong one a 401 "invalid api token".

mod errors;
mod limits;
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

use self::render::Rendered;
use crate::Shared;
use crate::neutral;
use crate::sse::{Playback, abort_after_flush};

pub(crate) fn routes() -> Router<Shared> {
    Router::new().route("/v2/chat", post(chat))
}

/// `POST /v2/chat`.
async fn chat(State(app): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return errors::invalid("request body is too large");
    };
    app.count_chat_request();
    let presented = parts.headers.contains_key(header::AUTHORIZATION);
    let authorized = app.authorized(&parts.headers);
    app.recorder.record(parts, body.clone());
    sleep(app.latency()).await;
    if !authorized {
        return if presented {
            errors::invalid_key()
        } else {
            errors::missing_key()
        };
    }
    let request: Map<String, Value> = match serde_json::from_slice(&body) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return errors::invalid("the request body must be a JSON object"),
        Err(e) => return errors::invalid(&format!("failed to decode JSON body: {e}")),
    };
    if let Err(message) = validate::request(&request) {
        return errors::invalid(&message);
    }
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let mut decision = match neutral::decide(&restate::to_openai(&request)) {
        Ok(decision) => decision,
        Err(invalid) => return errors::invalid(&invalid.message),
    };
    let finish = limits::apply(&mut decision, &request);
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
    let n = app.next_id();
    let rendered = Rendered {
        decision: &decision,
        id: format!("mock-cohere-{n}"),
        call_suffix: format!("mock{n}"),
        finish,
    };
    if !streaming {
        if faults.stream.cuts_whole_answer() {
            return aborted_json();
        }
        return json_response(rendered.whole().to_string().into());
    }
    let (mut events, opening) = rendered.events();
    let cut = faults.stream.cut(&mut events, opening);
    if cut.error {
        events.push(rendered.error_end(errors::RATE_LIMITED));
    }
    Playback {
        frames: events.iter().map(render::sse_frame).collect(),
        delay: faults.chunk_delay,
        abort: cut.abort,
    }
    .into_response()
}

fn json_response(body: Bytes) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
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
