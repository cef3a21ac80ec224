//! Other client protocols on the chat pipeline: Anthropic's Messages API
//! (`POST /v1/messages`, [`anthropic`]) and OpenAI's Responses API
//! (`POST /v1/responses`, stateless, [`responses`]).
//!
//! Each protocol translates its request into a chat-completions body and runs
//! it through `chat::translated`, so key auth, the wallet hold and settlement,
//! fallback over `models`, metering, provenance and traces are the chat
//! path's own. The answer, one JSON object or the chat SSE stream, is then
//! translated back. The cost shown is read from `service.cost_usd` (an exact
//! decimal string) and written again as an exact decimal, so it stays the
//! cost billed.

// The translations fail with the data plane's own `ApiError`, as the chat
// envelope does; boxing it here alone would make these paths differ.
#![allow(clippy::result_large_err)]

pub mod anthropic;
pub mod responses;

use std::convert::Infallible;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::server::RequestId;
use tollgate_core::money::Nanos;

pub fn routes() -> Router<crate::app::AppState> {
    Router::new()
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
        .route("/v1/responses", post(responses::create))
}

/// The request body as a JSON object. A body that could not be read or is
/// not an object is refused, with its request-log row, as the chat path
/// refuses one.
async fn read_object(
    data: &crate::data_plane::DataPlane,
    request_id: &RequestId,
    caller: &crate::auth::Caller,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
    what: &str,
) -> Result<Map<String, Value>, ApiError> {
    let parsed = match body {
        Ok(body) => parse_object(&body, what),
        Err(rejection) => Err(crate::data_plane::chat::body_error(data, &rejection)),
    };
    match parsed {
        Ok(object) => Ok(object),
        Err(error) => Err(crate::data_plane::chat::refused(data, request_id, None, caller, None, error).await),
    }
}

/// The request body as a JSON object, or a 400 naming the protocol.
fn parse_object(body: &[u8], what: &str) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ApiError::invalid_request("The request body must be a JSON object.")),
        Err(e) => Err(ApiError::invalid_request(format!(
            "The request body is not valid JSON for {what}: {e}"
        ))),
    }
}

/// A whole chat answer: the annotated `chat.completion` object and the cost
/// billed for it.
struct ChatAnswer {
    object: Map<String, Value>,
    cost: Nanos,
}

/// Reads the chat pipeline's whole answer (already in memory).
async fn whole_answer(response: Response) -> Result<ChatAnswer, ApiError> {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| ApiError::internal(format!("could not read the chat answer: {e}")))?;
    let object: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::internal(format!("the chat answer is not a JSON object: {e}")))?;
    let cost = billed_cost(&object);
    Ok(ChatAnswer { object, cost })
}

/// The exact cost billed, from `service.cost_usd`.
fn billed_cost(object: &Map<String, Value>) -> Nanos {
    object
        .get("service")
        .and_then(|s| s.get("cost_usd"))
        .and_then(Value::as_str)
        .and_then(|text| Nanos::from_usd(text).ok())
        .unwrap_or(Nanos::ZERO)
}

/// Token counts billed, as the chat answer states them in `usage`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    /// Every prompt token, cached ones included.
    prompt: u64,
    completion: u64,
    cache_read: u64,
    cache_write: u64,
    reasoning: u64,
}

impl Counts {
    fn of(object: &Map<String, Value>) -> Self {
        let usage = object.get("usage");
        let at = |path: &[&str]| {
            let mut value = usage;
            for key in path {
                value = value.and_then(|v| v.get(key));
            }
            value.and_then(Value::as_u64).unwrap_or(0)
        };
        Counts {
            prompt: at(&["prompt_tokens"]),
            completion: at(&["completion_tokens"]),
            cache_read: at(&["prompt_tokens_details", "cached_tokens"]),
            cache_write: at(&["prompt_tokens_details", "cache_write_tokens"]),
            reasoning: at(&["completion_tokens_details", "reasoning_tokens"]),
        }
    }

    /// Prompt tokens neither read from nor written to a cache.
    fn uncached_prompt(&self) -> u64 {
        self.prompt.saturating_sub(self.cache_read + self.cache_write)
    }
}

/// Serialises `object` with `usage.cost` as the exact decimal amount.
fn render_with_cost(object: Map<String, Value>, cost: Nanos) -> Vec<u8> {
    super::provenance::render(object, cost)
}

/// `object` rendered with its exact `usage.cost`, as a raw JSON value to nest.
fn raw_with_cost(object: Map<String, Value>, cost: Nanos) -> Box<RawValue> {
    let bytes = render_with_cost(object, cost);
    RawValue::from_string(String::from_utf8(bytes).expect("serde_json writes UTF-8")).expect("rendered JSON is valid")
}

/// A JSON answer with the request id header.
fn json_response(status: StatusCode, body: Vec<u8>, request_id: &RequestId) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(value) = HeaderValue::from_str(&request_id.0) {
        headers.insert("x-request-id", value);
    }
    response
}

/// Adds the headers every error answer carries (request id, `Retry-After`).
fn error_headers(response: &mut Response, error: &ApiError, request_id: &RequestId) {
    let headers = response.headers_mut();
    error.set_headers(headers);
    if let Ok(value) = HeaderValue::from_str(&request_id.0) {
        headers.insert("x-request-id", value);
    }
}

/// One item of a chat SSE stream, as the ingress translators see it.
enum ChatEvent {
    Chunk(Map<String, Value>),
    Done,
}

/// Turns the chat pipeline's SSE body into chat chunks for `translate`, and
/// its output into an SSE body of the protocol's own events. The chat body is
/// read in a task of its own; when the caller goes away the task stops
/// reading, and the chat stream sees its client gone.
fn translate_stream<T>(chat: Response, mut translator: T, request_id: &RequestId) -> Response
where
    T: FnMut(ChatEvent, &mut Vec<u8>) + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let mut body = chat.into_body().into_data_stream();
    tokio::spawn(async move {
        let mut pending: Vec<u8> = Vec::new();
        let mut done = false;
        while let Some(Ok(bytes)) = body.next().await {
            pending.extend_from_slice(&bytes);
            let mut out = Vec::new();
            // The chat stream writes whole `data: <json>\n\n` frames.
            while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = pending.drain(..end + 2).collect();
                let Some(data) = frame.strip_prefix(b"data: ") else {
                    continue;
                };
                let data = &data[..data.len() - 2];
                if data == b"[DONE]" {
                    translator(ChatEvent::Done, &mut out);
                    done = true;
                } else if let Ok(chunk) = serde_json::from_slice::<Map<String, Value>>(data) {
                    translator(ChatEvent::Chunk(chunk), &mut out);
                }
            }
            if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
                return;
            }
            if done {
                return;
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&request_id.0) {
        headers.insert("x-request-id", value);
    }
    response
}

/// Writes one `event: <name>` SSE frame.
fn write_event(out: &mut Vec<u8>, name: &str, data: &[u8]) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
}

/// The chat chunk's first choice.
fn first_choice(chunk: &Map<String, Value>) -> Option<&Value> {
    chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_split_the_prompt_by_cache_kind() {
        let object = serde_json::json!({"usage": {"prompt_tokens": 100, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
            "completion_tokens_details": {"reasoning_tokens": 2}}});
        let counts = Counts::of(object.as_object().unwrap());
        assert_eq!(counts.uncached_prompt(), 10);
        assert_eq!((counts.completion, counts.reasoning), (7, 2));
        assert_eq!(Counts::of(&Map::new()), Counts::default());
    }

    #[test]
    fn cost_comes_from_the_service_block() {
        let object = serde_json::json!({"service": {"cost_usd": "0.000012345"}});
        assert_eq!(billed_cost(object.as_object().unwrap()), Nanos(12_345));
        let rendered = raw_with_cost(Map::new(), Nanos(12_345));
        assert_eq!(rendered.get(), r#"{"usage":{"cost":0.000012345}}"#);
    }
}
