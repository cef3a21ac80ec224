//! A scriptable fake model provider for tests, the benchmark and the offline
//! quickstart. It speaks the OpenAI chat-completions protocol; other protocols
//! (Anthropic, Gemini, …) can be added as sibling modules of `openai` that
//! reuse the protocol-neutral pieces: `directives`, `faults`, `generate`, `sse`,
//! `text` and the request `recorder`.
//!
//! # Endpoints
//! - `POST /v1/chat/completions` (also `/chat/completions`)
//! - `GET /v1/models` (also `/models`): `small`, `medium`, `large`
//! - `POST /openai/deployments/{deployment}/chat/completions?api-version=…`:
//!   Azure OpenAI; the deployment is the model, the key goes in `api-key`
//! - `POST /model/{modelId}/converse` and `/model/{modelId}/converse-stream`:
//!   Amazon Bedrock Converse (JSON, or AWS event-stream frames); with a key,
//!   a SigV4 `authorization` whose access key id is the key's part before `:`
//! - `POST /v1beta/models/{model}:generateContent` and
//!   `/v1beta/models/{model}:streamGenerateContent?alt=sse` (also under `/v1/`):
//!   Google Gemini (SSE events, or one JSON array without `alt=sse`); the key
//!   goes in `x-goog-api-key` (or `?key=`)
//! - `POST /v1/messages`: the Anthropic Messages API (JSON, or SSE with
//!   `"stream": true`); the key goes in `x-api-key`, and `anthropic-version`
//!   is required; `POST /v1/messages/count_tokens` counts the prompt's
//!   `input_tokens` as the answer would bill them
//! - `POST /v2/chat`: Cohere v2 Chat (JSON, or SSE events with `"stream":
//!   true`); the key goes in `Authorization: Bearer`
//! - `POST /v1/responses` (also `/responses`): OpenAI's Responses API (a
//!   `response` object, or its named SSE events with `"stream": true`); the
//!   key goes in `Authorization: Bearer`
//! - `GET /__mock/requests`: the last 64 recorded API requests, oldest first,
//!   as `[{"method","path","headers":{lowercase name: value},"body":<JSON>}]`;
//!   `DELETE /__mock/requests` clears them
//! - Stripe, for a gateway's billing: `POST /v1/checkout/sessions` and the
//!   other Checkout Session and Event routes, with `/__stripe/…` controls
//!   that pay, refund, dispute and renew and deliver signed webhooks (see
//!   `stripe`)
//! - `GET /__mock/stats`: `{"chat_requests": n}`, all chat requests since start
//! - `PUT /__mock/outage` `{"status": 503}`: every OpenAI chat request answers
//!   that status (an OpenAI-shaped error) until `DELETE /__mock/outage`
//! - `GET /healthz`: 200
//!
//! # Deterministic output
//! - Reply text: `You said: <text of the last user message>` (string content, or
//!   the `text` parts of an array joined by one space). After a `role: "tool"`
//!   message: `Tool result: <its content>`.
//! - Tools: when `tools` is non-empty, `tool_choice` is not `"none"` and the last
//!   message is not a tool result, the answer is one call to the tool named by
//!   `tool_choice` (else the first tool) with arguments generated from its
//!   `parameters` schema; `finish_reason` is `tool_calls`. Schemas yield: object →
//!   its listed and required properties, string → `"mock"` (or a sample for a
//!   known `format`), integer/number → 1 (kept within `minimum`/`maximum`),
//!   boolean → true, array → `minItems` items (default 1, at most 16; string
//!   items after the first get ` 2`, ` 3`, … appended); `const`, first `enum`
//!   value, first `examples` value, `$ref`,
//!   `anyOf`/`oneOf` (first non-null branch) and `allOf` (merged) are honoured.
//! - A `<mock>{"reply", "tool", "arguments"}</mock>` script in a user message's
//!   text scripts a client whose body a test cannot touch (a coding agent run
//!   unmodified): with `tool`, one call to that offered tool with `arguments`
//!   until a tool result follows the script's message, then `Tool result: …`;
//!   without it, no tool call and the reply is `reply` (see `openai/answer.rs`).
//! - `response_format` `json_object` → `{"reply":"<reply text>"}`;
//!   `json_schema` → an instance of `json_schema.schema`.
//! - Usage: `prompt_tokens` = Σ over messages of (whitespace-separated words in
//!   its text content + 4); `completion_tokens` = words in the reply content, or
//!   for a tool call words in the arguments JSON text (minimum 1);
//!   `total_tokens` = their sum.
//! - Streaming sends a role chunk, one chunk per word (later words carry their
//!   leading whitespace, so the chunks concatenate to the non-streamed text), a
//!   `finish_reason` chunk, a `choices: []` usage chunk only when
//!   `stream_options.include_usage` is true, then `data: [DONE]`.
//!
//! # Directives and faults
//! A request body may carry a `mock` object;
//! real providers never see it, but a gateway passes unknown fields through:
//!
//! | field | effect |
//! | --- | --- |
//! | `reply` (string) | reply text |
//! | `words` (n) | reply `word1 word2 … wordn` |
//! | `status` (u16 ≥ 400) | answer with this status and an OpenAI-shaped error |
//! | `error_code` (string) | overrides the error `code` |
//! | `retry_after` (number or string) | `retry-after` header on error answers |
//! | `latency_ms` | delay before the response head |
//! | `chunk_delay_ms` | delay between stream frames |
//! | `cut_after` (n) | stream: send n `data:` frames (role chunk included), then drop the connection |
//! | `stream_error_after` (n) | stream: send n frames, then an error frame, then end without `[DONE]` |
//! | `eof_after` (n) | stream: send at most n frames, never the protocol's terminal event (`finish_reason` chunk and `[DONE]`, `message_stop`, `finishReason`, `messageStop`, `message-end`), then end the body cleanly |
//! | `cached_tokens` (n) | usage reports n prompt tokens read from the prompt cache (`prompt_tokens_details.cached_tokens`; Anthropic `cache_read_input_tokens`) |
//! | `cache_write_tokens` (n) | Anthropic: usage reports n prompt tokens written to the cache (`cache_creation_input_tokens`) |
//!
//! Model names script faults too, so fallback candidates can differ:
//! `fail-<status>` always answers that status, `cut-<n>` streams the role chunk
//! and n content chunks then drops the connection, `eof-<n>` streams the same
//! then ends the body cleanly with no terminal event, `ratelimit-<n>` streams n
//! content chunks then a rate-limit error frame, `slow-<ms>` delays the head.
//!
//! A request whose last message is an `assistant` message holding the start of
//! the reply the mock would give is a continuation: the mock answers only the
//! rest, so the partial answer and the continuation read as one reply.
//! For non-streaming requests a cut sends the head and aborts the body.
//! [`MockOptions::latency_ms`] is added to every request's delay.
//!
//! With [`MockOptions::prompt_cache`] (`--prompt-cache`), an OpenAI chat
//! request whose leading messages this process has seen before, in order,
//! reports their prompt tokens as `prompt_tokens_details.cached_tokens`
//! (the larger of that and the `cached_tokens` directive).
#![forbid(unsafe_code)]

mod anthropic;
mod azure;
mod bedrock;
mod cohere;
mod directives;
mod faults;
mod gemini;
mod generate;
mod neutral;
mod openai;
mod prompt_cache;
mod recorder;
mod responses;
mod sse;
mod stripe;
mod text;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, header};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::recorder::Recorder;

/// Process-wide behaviour of the mock, set on the command line.
#[derive(Clone, Debug, Default)]
pub struct MockOptions {
    /// Added to the delay before every response head.
    pub latency_ms: u64,
    /// When set, API requests need `Authorization: Bearer <key>`.
    pub require_api_key: Option<String>,
    /// Simulate a prompt cache: OpenAI chat answers report the tokens of the
    /// longest message prefix seen before as `cached_tokens`.
    pub prompt_cache: bool,
}

/// State shared by all handlers. Everything here is lock-free or locked only
/// for a few instructions, never across an await.
pub(crate) struct MockState {
    latency: Duration,
    /// Precomputed `Bearer <key>` so the check is a byte comparison.
    expected_auth: Option<Vec<u8>>,
    counter: AtomicU64,
    /// Chat requests received, for tests that reconcile upstream calls.
    chat_requests: AtomicU64,
    pub(crate) recorder: Recorder,
    /// A status every chat request answers until cleared (0: none), set by
    /// `PUT /__mock/outage`: the whole provider down, for failover tests.
    outage: std::sync::atomic::AtomicU16,
    /// `Some` with [`MockOptions::prompt_cache`].
    pub(crate) prompt_cache: Option<prompt_cache::PromptCache>,
    /// The fake Stripe's sessions, events and endpoints.
    pub(crate) stripe: stripe::Stripe,
}

impl MockState {
    fn new(opts: MockOptions) -> Self {
        Self {
            latency: Duration::from_millis(opts.latency_ms),
            expected_auth: opts.require_api_key.map(|key| format!("Bearer {key}").into_bytes()),
            counter: AtomicU64::new(0),
            chat_requests: AtomicU64::new(0),
            recorder: Recorder::default(),
            prompt_cache: opts.prompt_cache.then(prompt_cache::PromptCache::default),
            outage: std::sync::atomic::AtomicU16::new(0),
            stripe: stripe::Stripe::default(),
        }
    }

    /// Global delay from [`MockOptions::latency_ms`].
    pub(crate) fn latency(&self) -> Duration {
        self.latency
    }

    pub(crate) fn authorized(&self, headers: &HeaderMap) -> bool {
        match &self.expected_auth {
            None => true,
            Some(expected) => headers
                .get(header::AUTHORIZATION)
                .is_some_and(|v| v.as_bytes() == expected.as_slice()),
        }
    }

    /// For protocols that send the raw key in their own header (`x-api-key`,
    /// `x-goog-api-key`, …): whether `presented` is the required key.
    pub(crate) fn key_matches(&self, presented: Option<&[u8]>) -> bool {
        match &self.expected_auth {
            None => true,
            Some(expected) => {
                let key = expected.strip_prefix(b"Bearer ").unwrap_or(expected);
                presented == Some(key)
            }
        }
    }

    /// The status of a provider-wide outage, while one is set.
    pub(crate) fn outage(&self) -> Option<u16> {
        Some(self.outage.load(Ordering::Relaxed)).filter(|status| *status != 0)
    }

    pub(crate) fn count_chat_request(&self) {
        self.chat_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Sequence number for response and tool-call ids (starts at 1).
    pub(crate) fn next_id(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed) + 1
    }
}

pub(crate) type Shared = Arc<MockState>;

/// The mock's routes, ready to be served or nested.
pub fn router(opts: MockOptions) -> Router {
    let state: Shared = Arc::new(MockState::new(opts));
    Router::new()
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/chat/completions", post(openai::chat_completions))
        .route("/v1/embeddings", post(openai::operations::embeddings))
        .route("/embeddings", post(openai::operations::embeddings))
        .route("/v1/moderations", post(openai::operations::moderations))
        .route("/moderations", post(openai::operations::moderations))
        .route("/v1/images/generations", post(openai::operations::image_generations))
        .route("/v1/images/edits", post(openai::operations::image_edits))
        .route("/v1/audio/speech", post(openai::operations::speech))
        .route("/v1/audio/transcriptions", post(openai::operations::transcriptions))
        .route("/v1/audio/translations", post(openai::operations::transcriptions))
        .route("/v1/rerank", post(openai::operations::rerank))
        .route("/v2/rerank", post(openai::operations::rerank))
        .route("/v2/embed", post(openai::operations::cohere_embed))
        .route(
            "/openai/deployments/{deployment}/chat/completions",
            post(azure::chat_completions),
        )
        .route("/openai/deployments/{deployment}/{*path}", post(azure::operation))
        .merge(gemini::routes())
        .merge(anthropic::routes())
        .merge(cohere::routes())
        .merge(responses::routes())
        .merge(bedrock::routes())
        .merge(stripe::routes())
        .route("/v1/models", get(openai::models))
        .route("/models", get(openai::models))
        .route("/__mock/requests", get(recorder::list).delete(recorder::clear))
        .route("/__mock/stats", get(stats))
        .route("/__mock/outage", axum::routing::put(start_outage).delete(end_outage))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(state)
}

/// `GET /__mock/stats`: `{"chat_requests": n}`, every chat request received
/// since start (the recorder keeps only the last 64).
async fn stats(axum::extract::State(app): axum::extract::State<Shared>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "chat_requests": app.chat_requests.load(Ordering::Relaxed) }))
}

/// `PUT /__mock/outage` with `{"status": 503}`: every chat request answers
/// that status until `DELETE /__mock/outage`.
async fn start_outage(
    axum::extract::State(app): axum::extract::State<Shared>,
    axum::Json(outage): axum::Json<serde_json::Value>,
) -> axum::http::StatusCode {
    let status = outage["status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .unwrap_or(503);
    app.outage.store(status.max(400), Ordering::Relaxed);
    axum::http::StatusCode::NO_CONTENT
}

async fn end_outage(axum::extract::State(app): axum::extract::State<Shared>) -> axum::http::StatusCode {
    app.outage.store(0, Ordering::Relaxed);
    axum::http::StatusCode::NO_CONTENT
}

/// Serves [`router`] on `listener` until the process ends or accepting fails.
pub async fn serve(listener: TcpListener, opts: MockOptions) -> std::io::Result<()> {
    // Small SSE frames must not wait for Nagle's algorithm, or the benchmark
    // would measure 40 ms delayed-ACK stalls instead of the gateway.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(opts)).await
}
