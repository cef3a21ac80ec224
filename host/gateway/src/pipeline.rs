//! The data plane's one door: [`DataPlane::run`] takes an operation for a
//! caller at a call site and gives back a typed answer, a whole
//! [`Completion`] or a [`ChatStream`] of [`StreamEvent`]s, or the typed
//! failure ([`ApiError`], whose `failure` decisions read).
//!
//! Every way into a model goes through it: the `/v1/chat/completions`
//! handler (`http`), the other client dialects (`ingress`), skills' and
//! hosted actors' model calls. None of them reads the gateway's own JSON or
//! SSE back: the cost, the counts billed and the provenance come typed in
//! [`Service`]. Rendering an answer for the wire is the caller's part.
//!
//! Chat has its own stages (`chat`); embeddings, moderations and the other
//! operations of WIT 0.3.0 share one set (`operations`), behind the same
//! admission, attempts, settlement and record.

use std::sync::Arc;

use axum::body::Bytes;
use bytes::BytesMut;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::DataPlane;
use super::billing::CostCeiling;
use super::provenance::render;
use tollgate_identity::auth::Caller;
use tollgate_plugin_host::Event;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

pub use super::guards::GuardRoute;
pub use super::operations::OperationCall;
pub use super::provenance::Service;

/// What the pipeline is asked to do.
pub enum Operation {
    Chat(ChatCall),
    /// Embeddings, moderations and the other operations besides chat.
    Model(OperationCall),
}

/// A chat completion: the chat-completions body, and the caller's request in
/// a provider's own dialect when an ingress dialect has one.
pub struct ChatCall {
    pub body: Bytes,
    pub native: Option<NativeRequest>,
    /// What the caller's `Cache-Control` allows the response cache.
    pub cache: CacheUse,
}

/// What a request allows the response cache (`Cache-Control`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheUse {
    /// Served from the cache when kept, and kept.
    #[default]
    Full,
    /// `no-cache`: asked upstream, and the answer kept.
    Refresh,
    /// `no-store`: neither served from nor kept.
    None,
}

impl CacheUse {
    /// From a request's `Cache-Control` header.
    pub fn from_header(value: Option<&str>) -> Self {
        let Some(value) = value else { return CacheUse::Full };
        let directives = value.split(',').map(|d| d.trim().to_ascii_lowercase());
        let mut cache = CacheUse::Full;
        for directive in directives {
            match directive.as_str() {
                "no-store" => return CacheUse::None,
                "no-cache" => cache = CacheUse::Refresh,
                _ => {}
            }
        }
        cache
    }
}

impl ChatCall {
    /// A plain chat-completions body.
    pub fn body(body: Bytes) -> Self {
        ChatCall {
            body,
            native: None,
            cache: CacheUse::Full,
        }
    }
}

/// The caller's request in a provider's own dialect, beside its chat form.
pub struct NativeRequest {
    /// E.g. `anthropic-messages`.
    pub dialect: &'static str,
    /// The caller's body, with the gateway's own fields removed.
    pub body: Bytes,
    /// The request carries what only the dialect can (e.g. `document`
    /// blocks): candidates whose adapter would translate it are dropped.
    pub required: bool,
    /// Caller headers a native upstream request carries (`anthropic-beta`).
    pub headers: Vec<(String, String)>,
}

/// Where a request comes from: its id and, for a model call inside another
/// request (a skill's, an actor's), the request it runs inside and the cap
/// on its worst case (an actor run's budget).
pub struct CallSite<'a> {
    pub request_id: &'a RequestId,
    pub parent: Option<&'a str>,
    pub ceiling: Option<&'a dyn CostCeiling>,
    /// How a stream that fails before any content answers.
    pub stream_failure: StreamFailure,
    /// Which guardrails apply: a client's request is `Chat`, a hosted
    /// actor's model call `Actors`; `None` for the calls guardrails and the
    /// cache make themselves (a judge's model call, a semantic embedding),
    /// which are not checked again.
    pub checked_as: Option<GuardRoute>,
}

impl<'a> CallSite<'a> {
    /// A request of its own (not inside another).
    pub fn top(request_id: &'a RequestId, stream_failure: StreamFailure) -> Self {
        CallSite {
            request_id,
            parent: None,
            ceiling: None,
            stream_failure,
            checked_as: Some(GuardRoute::Chat),
        }
    }
}

/// How a streamed request whose every candidate failed before any content
/// is answered: as a stream ending in one error chunk (chat completions), or
/// as the error itself, so an ingress dialect can answer it with an HTTP
/// status in its own error shape.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum StreamFailure {
    Chunk,
    Status,
}

/// The pipeline's answer.
pub enum Answer {
    Whole(Completion),
    Stream(ChatStream),
    /// An operation's answer that is not JSON: speech audio, a transcript
    /// asked for as text.
    Media(Media),
}

/// A settled answer that is not JSON: its bytes as the provider sent them,
/// with the provenance typed (rendered as headers).
pub struct Media {
    pub content_type: String,
    pub body: Bytes,
    pub service: Service,
}

/// A whole answer, settled: the answer object with `model`, `usage`,
/// `provider` and `service` set (but for `usage.cost`, which [`render`]
/// writes exactly), and the same facts typed.
pub struct Completion {
    pub object: Map<String, Value>,
    pub service: Service,
    /// The object is in the caller's native dialect (an adapter took it
    /// natively), not a `chat.completion`.
    pub native: bool,
}

impl Completion {
    /// The answer as JSON, with its exact `usage.cost`.
    pub fn render(self) -> Vec<u8> {
        render(self.object, self.service.cost(), self.service.route_json())
    }
}

/// A streamed answer: events in order, the last one [`StreamEvent::End`].
/// Dropping it is the caller going away: the upstream is abandoned and what
/// was relayed is billed.
pub struct ChatStream {
    pub(super) events: mpsc::Receiver<StreamEvent>,
    /// The events are the caller's native dialect (a native session).
    pub native: bool,
}

impl ChatStream {
    /// The next event; `None` after [`StreamEvent::End`].
    pub async fn next(&mut self) -> Option<StreamEvent> {
        self.events.recv().await
    }

    /// A stream of one event (a failure before any content).
    pub(super) fn of(event: StreamEvent) -> Self {
        let (tx, events) = mpsc::channel(1);
        tx.try_send(event).ok().expect("a fresh channel has room");
        ChatStream { events, native: false }
    }
}

pub enum StreamEvent {
    /// Chat chunks, each one checked JSON object carrying `provider` and
    /// the requested `model` (see `chunk`).
    Chunks(Vec<Bytes>),
    /// A native session's events, `message_start` naming the requested
    /// model; the closing ones come after settlement, annotated.
    Native(Vec<Event>),
    /// The end, after settlement.
    End(Ending),
}

/// How a stream ended: settled, with what was billed.
pub struct Ending {
    /// A chat-form stream's closing chunk, annotated like a whole answer
    /// (a failure's carries `finish_reason: "error"` and `error`); `None`
    /// for a native stream, whose closing events came before.
    pub chunk: Option<Map<String, Value>>,
    pub service: Service,
    /// Why the stream failed, if it did.
    pub error: Option<ApiError>,
}

impl Ending {
    /// The closing chunk with its exact `usage.cost`.
    pub fn render_chunk(chunk: Map<String, Value>, service: &Service) -> Vec<u8> {
        render(chunk, service.cost(), service.route_json())
    }
}

/// Chat chunks, checked and with the host's fields, as the pump hands them
/// on: one buffer, split.
pub(super) fn split_chunks(buffer: BytesMut, ends: &[usize]) -> Vec<Bytes> {
    let buffer = buffer.freeze();
    let mut start = 0;
    ends.iter()
        .map(|&end| {
            let chunk = buffer.slice(start..end);
            start = end;
            chunk
        })
        .collect()
}

impl DataPlane {
    /// Runs `operation` for `caller`: admission (the plan, budgets and the
    /// wallet hold), the attempts over its candidates, settlement and the
    /// request log, usage event and spans.
    pub async fn run(
        self: &Arc<Self>,
        operation: Operation,
        caller: &Caller,
        site: CallSite<'_>,
    ) -> Result<Answer, ApiError> {
        super::stages::run(self, operation, caller, &site).await
    }
}
