//! Other client protocols on the chat pipeline: Anthropic's Messages API
//! (`POST /v1/messages`, [`anthropic`]) and OpenAI's Responses API
//! (`POST /v1/responses`, stateless, [`responses`]).
//!
//! Each protocol translates its request into a chat-completions body and runs
//! it through the pipeline (`DataPlane::run`), so key auth, the wallet hold
//! and settlement, fallback over `models`, metering, provenance and traces are
//! the chat path's own. The typed answer, a completion or a stream of chunks,
//! is then translated back. The cost shown is the pipeline's typed
//! [`Service`] cost, written as an exact decimal, so it stays the cost billed.

// The translations fail with the data plane's own `ApiError`, as the chat
// envelope does; boxing it here alone would make these paths differ.
#![allow(clippy::result_large_err)]

pub mod anthropic;
pub mod responses;

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::FromRef;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::DataPlane;
use super::pipeline::{CallSite, ChatStream, Ending, Service, StreamEvent};
use tollgate_core::money::Nanos;
use tollgate_identity::auth::AuthState;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<DataPlane>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    Router::new()
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
        .route("/v1/responses", post(responses::create))
}

/// The request body as a JSON object. A body that could not be read or is
/// not an object is refused, with its request-log row, as the chat path
/// refuses one.
async fn read_object(
    data: &crate::DataPlane,
    site: &CallSite<'_>,
    caller: &tollgate_identity::auth::Caller,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
    what: &str,
) -> Result<Map<String, Value>, ApiError> {
    let parsed = match body {
        Ok(body) => parse_object(&body, what),
        Err(rejection) => Err(crate::chat::body_error(data, &rejection)),
    };
    match parsed {
        Ok(object) => Ok(object),
        Err(error) => Err(crate::chat::refused(data, site, caller, None, error).await),
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

/// Token counts: billed ([`Counts::billed`]), or as a chunk states them.
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

    /// The counts billed, over every attempt.
    fn billed(service: &Service) -> Self {
        let Some(usage) = service.billed.usage else {
            return Counts::default();
        };
        Counts {
            prompt: usage.input,
            completion: usage.output,
            cache_read: usage.cache_read.unwrap_or(0),
            cache_write: usage.cache_write.unwrap_or(0),
            reasoning: usage.reasoning.unwrap_or(0),
        }
    }

    /// Prompt tokens neither read from nor written to a cache.
    fn uncached_prompt(&self) -> u64 {
        self.prompt.saturating_sub(self.cache_read + self.cache_write)
    }
}

/// Serialises `object` with `usage.cost` as the exact decimal amount.
fn render_with_cost(object: Map<String, Value>, cost: Nanos) -> Vec<u8> {
    super::provenance::render(object, cost, None)
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

/// One item of a chat stream, as the ingress translators see it.
enum ChatEvent {
    /// One chat chunk, with `provider` and `model`.
    Chunk(Map<String, Value>),
    /// The end, settled: the closing (or error) chunk and what was billed.
    End(Ending),
}

/// Turns the pipeline's chat stream into an SSE body of the protocol's own
/// events, `translate` writing each. When the caller goes away the body is
/// dropped, and with it the chat stream: the pipeline sees its client gone.
fn translate_stream<T>(chat: ChatStream, translator: T, request_id: &RequestId) -> Response
where
    T: FnMut(ChatEvent, &mut Vec<u8>) + Send + 'static,
{
    let body = futures_util::stream::unfold(Some((chat, translator)), |state| async move {
        let (mut chat, mut translator) = state?;
        let event = chat.next().await?;
        let mut out = Vec::new();
        let more = match event {
            StreamEvent::Chunks(chunks) => {
                for chunk in chunks {
                    // The pipeline checked each chunk as one JSON object.
                    if let Ok(chunk) = serde_json::from_slice::<Map<String, Value>>(&chunk) {
                        translator(ChatEvent::Chunk(chunk), &mut out);
                    }
                }
                true
            }
            // A chat-form stream carries no native events.
            StreamEvent::Native(_) => true,
            StreamEvent::End(ending) => {
                translator(ChatEvent::End(ending), &mut out);
                false
            }
        };
        Some((
            Ok::<_, Infallible>(Bytes::from(out)),
            more.then_some((chat, translator)),
        ))
    });
    super::http::sse_response(Body::from_stream(body), request_id)
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
pub(super) mod tests {
    use super::*;
    use crate::provenance::{Metered, Trail};
    use tollgate_plugin_host::Usage;

    /// What a settled answer billed: `cost` nano-USD for `usage`.
    pub fn service(cost: i64, usage: Option<Usage>) -> Service {
        let catalog = tollgate_routing::catalog::Catalog::build(&Default::default(), &|_| None).unwrap();
        Service {
            route: catalog.resolve("openai/gpt-4o-mini").unwrap().clone(),
            request_id: "req_1".into(),
            billed: Metered {
                usage,
                cost: Nanos(cost),
                fee: Nanos::ZERO,
            },
            trail: Trail::default(),
            snapshot_id: None,
        }
    }

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
    fn the_cost_is_written_exactly() {
        let rendered = raw_with_cost(Map::new(), Nanos(12_345));
        assert_eq!(rendered.get(), r#"{"usage":{"cost":0.000012345}}"#);
    }
}
