//! Streamed answers. The upstream's bytes are framed into events by the host,
//! translated by the adapter in batches (every event already received goes in one
//! call), checked, and handed on as [`StreamEvent::Chunks`] carrying
//! `provider`. The stream ends in [`StreamEvent::End`], after settlement: the
//! closing chunk with `usage` and `service`, or one error chunk
//! (`finish_reason: "error"`) when it broke. Framing for the wire is the
//! caller's (`http` for chat completions, `ingress` for the other dialects).
//!
//! A native session (an adapter that took the caller's dialect natively, see
//! `native`) relays the dialect's own events instead, holding back the
//! closing ones until the bill is settled, and never continues on another
//! candidate once it has answered.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use bytes::BytesMut;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::DataPlane;
use super::attempts::{Answered, Call, exchange_error, first_answer};
use super::billing::Bill;
use super::chunk::{ChunkError, write_object};
use super::native;
use super::pipeline::{ChatStream, Ending, StreamEvent, split_chunks};
use super::provenance::{Attempt, Metered, Service, Trail};
use super::upstream::{error_chain, truncated};
use tollgate_plugin_host::{Event, ExchangeError, Session};
use tollgate_routing::catalog::ModelRoute;
use tollgate_routing::traffic::InFlight;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// What a stream needs to continue on another candidate after a mid-stream failure.
pub struct Failover {
    /// The candidates after the one answering, in order.
    pub remaining: VecDeque<Arc<ModelRoute>>,
    /// The caller's request body, for the next adapter.
    pub body: Bytes,
    pub injected_cap: Option<u32>,
    /// The request's `continuation` (default true).
    pub enabled: bool,
    /// The number the next attempt gets.
    pub attempt: u32,
}

/// The answer text relayed so far, and whether a tool call is under way.
#[derive(Default)]
struct PartialAnswer {
    text: String,
    in_tool_call: bool,
}

impl PartialAnswer {
    fn observe(&mut self, chunk: &[u8]) {
        #[derive(Deserialize)]
        struct Chunk<'a> {
            #[serde(borrow, default)]
            choices: Vec<Choice<'a>>,
        }
        #[derive(Deserialize)]
        struct Choice<'a> {
            #[serde(borrow, default)]
            delta: Option<Delta<'a>>,
        }
        #[derive(Deserialize)]
        struct Delta<'a> {
            #[serde(borrow, default)]
            content: Option<std::borrow::Cow<'a, str>>,
            #[serde(default)]
            tool_calls: Option<serde::de::IgnoredAny>,
        }
        let Ok(chunk) = serde_json::from_slice::<Chunk<'_>>(chunk) else {
            return;
        };
        for delta in chunk.choices.into_iter().filter_map(|c| c.delta) {
            if let Some(content) = delta.content {
                self.text.push_str(&content);
            }
            self.in_tool_call |= delta.tool_calls.is_some();
        }
    }
}

/// Most events the adapter gets in one call.
const MAX_BATCH: usize = 64;

pub fn respond(
    data: Arc<DataPlane>,
    answered: Answered,
    bill: Bill,
    trail: Trail,
    failover: Failover,
    request_id: RequestId,
) -> ChatStream {
    let Answered {
        route,
        session,
        response: upstream,
        started,
        flight,
    } = answered;
    let (tx, events) = mpsc::channel::<StreamEvent>(32);
    let native = session.is_native();
    let status = upstream.status().as_u16();
    let pump = Pump {
        data,
        route,
        session,
        bill,
        trail,
        failover,
        answer: PartialAnswer::default(),
        chunks_sent: 0,
        held: None,
        request_id: request_id.clone(),
        started,
        status,
        flight,
        tx,
    };
    tokio::spawn(pump.run(upstream));
    ChatStream { events, native }
}

struct Pump {
    data: Arc<DataPlane>,
    route: Arc<ModelRoute>,
    session: Session,
    bill: Bill,
    /// Attempts so far, this one excluded until it ends.
    trail: Trail,
    /// The candidates left if this upstream fails mid-stream.
    failover: Failover,
    /// What the caller has received, tracked only while a failover is possible.
    answer: PartialAnswer,
    /// Chunks relayed in this attempt: the local token count when the upstream
    /// reports no usage.
    chunks_sent: u64,
    /// Native session: the closing events held back until the bill is
    /// settled (`Some` once the first one arrived).
    held: Option<Vec<Event>>,
    request_id: RequestId,
    started: Instant,
    status: u16,
    /// This attempt in its route's live traffic.
    flight: InFlight,
    tx: mpsc::Sender<StreamEvent>,
}

/// Why the pump stopped early.
enum Stop {
    Failed(ApiError),
    ClientGone,
}

impl Pump {
    async fn run(mut self, mut upstream: reqwest::Response) {
        loop {
            let outcome = self.relay(upstream).await;
            let usage = self.session.usage().ok().flatten();
            let metered = self.bill.meter(&self.route, usage, self.chunks_sent);
            match outcome {
                Ok(last_chunks) => {
                    if let Some(usage) = metered.usage {
                        self.flight.finished(usage.input + usage.output, usage.output);
                    }
                    return self.finish_ok(last_chunks, metered).await;
                }
                Err(Stop::ClientGone) => {
                    tracing::info!(request_id = %self.request_id.0, "client went away mid-stream");
                    self.record(metered, "client_disconnected");
                    let route = self.route.clone();
                    self.bill
                        .close(Some(&route), &self.trail, "client_disconnected", Some(self.status))
                        .await;
                    return;
                }
                Err(Stop::Failed(error)) => {
                    if error.is_health_failure() {
                        self.data.health.failed_after_answer(&self.route.id);
                        self.flight.failed();
                    }
                    if self.can_continue(&error) {
                        self.record(metered, error.code);
                        match self.next_candidate(error).await {
                            Ok(next) => upstream = next,
                            Err(error) => return self.finish_error(error, None).await,
                        }
                    } else {
                        return self.finish_error(error, Some(metered)).await;
                    }
                }
            }
        }
    }

    /// A mid-stream failure can move to the next candidate when the upstream (not
    /// the request) failed, continuation is allowed, a candidate is left, and no
    /// tool call is half-sent (it cannot be resumed without garbling it). A
    /// native stream is never continued: another candidate would start a
    /// second message.
    fn can_continue(&self, error: &ApiError) -> bool {
        error.is_retryable()
            && !self.session.is_native()
            && self.failover.enabled
            && !self.failover.remaining.is_empty()
            && !self.answer.in_tool_call
    }

    /// Starts the next candidates in turn, asking each to continue the partial
    /// answer, until one answers. Failed starts go to the trail.
    async fn next_candidate(&mut self, error: ApiError) -> Result<reqwest::Response, ApiError> {
        if self.failover.remaining.is_empty() {
            return Err(error);
        }
        let call = Call {
            request_id: &self.request_id.0,
            body: &self.failover.body,
            native: None,
            stream: true,
            injected_cap: self.failover.injected_cap,
            continuation: (!self.answer.text.is_empty()).then(|| self.answer.text.clone()),
            operation: None,
        };
        let answered = first_answer(
            &self.data,
            &mut self.failover.remaining,
            &call,
            &mut self.failover.attempt,
            &mut self.bill,
            &mut self.trail,
        )
        .await?;
        tracing::info!(request_id = %self.request_id.0, provider = %answered.route.provider.id, "continuing the stream on the next candidate");
        self.session = answered.session;
        self.route = answered.route;
        self.status = answered.response.status().as_u16();
        self.started = answered.started;
        self.flight = answered.flight;
        self.chunks_sent = 0;
        Ok(answered.response)
    }

    /// Adds this attempt to the trail.
    fn record(&mut self, metered: Metered, outcome: &str) {
        self.trail.push(Attempt {
            route: self.route.clone(),
            outcome: outcome.to_string(),
            status: Some(self.status),
            latency: self.started.elapsed(),
            metered,
        });
    }

    /// Relays upstream events until the upstream ends; returns the adapter's
    /// closing chunks.
    async fn relay(&mut self, upstream: reqwest::Response) -> Result<Vec<Vec<u8>>, Stop> {
        let provider = self.route.provider.id.clone();
        let model = self.route.id.clone();
        let idle = self.data.upstream.idle_timeout();
        let mut events = super::framing::events(upstream).ready_chunks(MAX_BATCH);
        let mut batch = Vec::with_capacity(MAX_BATCH);
        loop {
            let next = tokio::time::timeout(idle, events.next()).await;
            let received = match next {
                Err(_) => {
                    return Err(Stop::Failed(ApiError::upstream_timeout(
                        &provider,
                        "between stream chunks",
                    )));
                }
                Ok(None) => break,
                Ok(Some(received)) => received,
            };
            batch.clear();
            let mut broken = None;
            for item in received {
                match item {
                    Ok(event) => batch.push(event),
                    Err(e) => {
                        broken = Some(ApiError::upstream_unreachable(
                            &provider,
                            format!("stream broke: {}", error_chain(&e)),
                        ));
                        break;
                    }
                }
            }
            if !batch.is_empty() && self.session.is_native() {
                let events = self
                    .session
                    .native_events(&batch)
                    .map_err(|e| Stop::Failed(exchange_error(&self.route, e)))?;
                self.relay_native(events).await?;
            } else if !batch.is_empty() {
                let chunks = self
                    .session
                    .on_events(&batch)
                    .map_err(|e| Stop::Failed(exchange_error(&self.route, e)))?;
                if !chunks.is_empty() {
                    self.chunks_sent += chunks.len() as u64;
                    if self.failover.enabled && !self.failover.remaining.is_empty() {
                        for chunk in &chunks {
                            self.answer.observe(chunk);
                        }
                    }
                    let checked =
                        checked_chunks(&chunks, &provider, &model).map_err(|e| Stop::Failed(self.bad_chunk(e)))?;
                    self.send(StreamEvent::Chunks(checked)).await?;
                    self.bill.first_chunk_sent(self.started);
                }
            }
            if let Some(error) = broken {
                return Err(Stop::Failed(error));
            }
        }
        if self.session.is_native() {
            let events = self
                .session
                .native_finish()
                .map_err(|e| Stop::Failed(self.ended_early(e)))?;
            self.relay_native(events).await?;
            return Ok(Vec::new());
        }
        self.session.finish().map_err(|e| Stop::Failed(self.ended_early(e)))
    }

    /// The body ended cleanly, and the adapter's `finish` refused it. Only
    /// the adapter knows each protocol's terminal event (`[DONE]` or a
    /// `finish_reason`, `message_stop`, `finishReason`, `messageStop`,
    /// `message-end`), so an error it reports here means the stream was cut
    /// short before it; a trap stays an adapter fault.
    fn ended_early(&self, error: ExchangeError) -> ApiError {
        match error {
            ExchangeError::Reported(reported) => truncated(&self.route.provider.id, &reported.message),
            fault => exchange_error(&self.route, fault),
        }
    }

    /// Native events: relayed, except the closing ones (from the dialect's
    /// first closing event on), which are held for
    /// [`finish_native`](Self::finish_native).
    async fn relay_native(&mut self, events: Vec<Event>) -> Result<(), Stop> {
        let mut relayed = Vec::with_capacity(events.len());
        for event in events {
            native::check_event(&event).map_err(|e| Stop::Failed(self.bad_chunk(e)))?;
            if self.held.is_none() && native::closes(&event) {
                self.held = Some(Vec::new());
            }
            match &mut self.held {
                Some(held) => held.push(event),
                None => match native::with_model(&event, &self.route.id) {
                    Some(data) => relayed.push(Event { data, ..event }),
                    None => relayed.push(event),
                },
            }
        }
        if !relayed.is_empty() {
            self.chunks_sent += relayed.len() as u64;
            self.send(StreamEvent::Native(relayed)).await?;
            self.bill.first_chunk_sent(self.started);
        }
        Ok(())
    }

    async fn finish_ok(mut self, mut chunks: Vec<Vec<u8>>, metered: Metered) {
        if self.session.is_native() {
            return self.finish_native(metered).await;
        }
        let last = chunks.pop();
        let checked = match checked_chunks(&chunks, &self.route.provider.id, &self.route.id) {
            Ok(checked) => checked,
            Err(e) => {
                let error = self.bad_chunk(e);
                return self.finish_error(error, Some(metered)).await;
            }
        };
        let mut closing: Map<String, Value> = match last.as_deref().map(serde_json::from_slice::<Map<String, Value>>) {
            Some(Ok(object)) => object,
            None => self.empty_chunk(),
            Some(Err(e)) => {
                let error = self.bad_chunk(ChunkError::NotAnObject(e.to_string()));
                return self.finish_error(error, Some(metered)).await;
            }
        };
        if closing.get("created").is_none_or(|c| c.is_null() || c == 0) {
            closing.insert("created".into(), Value::from(super::chunk::unix_now()));
        }
        // The upstream has ended: what it sent is billed as an answer even
        // if the caller leaves now, as before settlement it would have been.
        if !checked.is_empty() {
            let _ = self.send(StreamEvent::Chunks(checked)).await;
        }
        let service = self.settle(&mut closing, Some(metered), "success").await;
        let _ = self
            .send(StreamEvent::End(Ending {
                chunk: Some(closing),
                service,
                error: None,
            }))
            .await;
    }

    /// A native stream ended well: settle, then relay the held closing
    /// events, the dialect's usage event carrying `provider`, `service` and
    /// `usage.cost`.
    async fn finish_native(mut self, metered: Metered) {
        let billed = self.close_bill(Some(metered), "success").await;
        let held = self.held.take().unwrap_or_default();
        let service = self.service(billed);
        let closing: Vec<Event> = held
            .into_iter()
            .map(|event| match native::annotate_closing(&event, &service) {
                Some(data) => Event { data, ..event },
                None => event,
            })
            .collect();
        if self.send(StreamEvent::Native(closing)).await.is_ok() {
            let _ = self
                .send(StreamEvent::End(Ending {
                    chunk: None,
                    service,
                    error: None,
                }))
                .await;
        }
    }

    /// Ends the stream with one error chunk (a native stream: the dialect's
    /// error event). `metered` is this attempt's usage, or `None` when the
    /// attempt is already in the trail.
    async fn finish_error(mut self, error: ApiError, metered: Option<Metered>) {
        tracing::warn!(request_id = %self.request_id.0, code = error.code, "stream failed: {}", error.message);
        if self.session.is_native() {
            self.held = None;
            let billed = self.close_bill(metered, error.code).await;
            let service = self.service(billed);
            let _ = self
                .send(StreamEvent::End(Ending {
                    chunk: None,
                    service,
                    error: Some(error),
                }))
                .await;
            return;
        }
        let mut chunk = self.empty_chunk();
        chunk.insert(
            "choices".into(),
            json!([{ "index": 0, "delta": {}, "finish_reason": "error" }]),
        );
        chunk.insert("error".into(), error.error_object());
        let service = self.settle(&mut chunk, metered, error.code).await;
        let _ = self
            .send(StreamEvent::End(Ending {
                chunk: Some(chunk),
                service,
                error: Some(error),
            }))
            .await;
    }

    /// Settles the bill (before the caller sees the cost), then annotates
    /// the closing chunk with what was billed.
    async fn settle(
        &mut self,
        closing: &mut Map<String, Value>,
        metered: Option<Metered>,
        outcome: &'static str,
    ) -> Service {
        let billed = self.close_bill(metered, outcome).await;
        let service = self.service(billed);
        service.annotate(closing);
        service
    }

    /// Records this attempt (unless already in the trail) and settles the bill.
    async fn close_bill(&mut self, metered: Option<Metered>, outcome: &'static str) -> Metered {
        if let Some(metered) = metered {
            self.record(metered, outcome);
        }
        self.bill
            .close(Some(&self.route), &self.trail, outcome, Some(self.status))
            .await
    }

    /// What was billed, once the bill is closed (the stream ends with it).
    fn service(&mut self, billed: Metered) -> Service {
        Service {
            route: self.route.clone(),
            request_id: self.request_id.0.to_string(),
            billed,
            trail: std::mem::take(&mut self.trail),
            snapshot_id: Some(self.bill.snapshot_id()),
        }
    }

    fn empty_chunk(&self) -> Map<String, Value> {
        empty_chunk(&self.request_id, &self.route)
    }

    fn bad_chunk(&self, error: ChunkError) -> ApiError {
        ApiError::adapter_refused(&self.route.provider.adapter, error)
    }

    async fn send(&mut self, event: StreamEvent) -> Result<(), Stop> {
        self.tx.send(event).await.map_err(|_| Stop::ClientGone)
    }
}

/// The adapter's chunks, checked and carrying the host's fields (`chunk`).
fn checked_chunks(chunks: &[Vec<u8>], provider: &str, model: &str) -> Result<Vec<Bytes>, ChunkError> {
    let mut buffer = BytesMut::with_capacity(chunks.iter().map(|c| c.len() + 64).sum());
    let mut ends = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        write_object(&mut buffer, provider, model, chunk)?;
        ends.push(buffer.len());
    }
    Ok(split_chunks(buffer, &ends))
}

fn empty_chunk(request_id: &RequestId, route: &ModelRoute) -> Map<String, Value> {
    let created = super::chunk::unix_now();
    let mut chunk = Map::new();
    chunk.insert("id".into(), Value::String(request_id.0.to_string()));
    chunk.insert("object".into(), Value::String("chat.completion.chunk".into()));
    chunk.insert("created".into(), Value::from(created));
    chunk.insert("model".into(), Value::String(route.id.clone()));
    chunk.insert("choices".into(), Value::Array(Vec::new()));
    chunk
}

/// The streamed answer when every candidate failed before any content: one
/// error chunk (`finish_reason: "error"`, the attempt trail). `billed` is
/// what the failed attempts cost (already settled).
pub fn failed(
    request_id: &RequestId,
    route: Arc<ModelRoute>,
    trail: Trail,
    billed: Metered,
    snapshot_id: i64,
    error: ApiError,
) -> ChatStream {
    let mut chunk = empty_chunk(request_id, &route);
    chunk.insert(
        "choices".into(),
        json!([{ "index": 0, "delta": {}, "finish_reason": "error" }]),
    );
    chunk.insert("error".into(), error.error_object());
    let service = Service {
        route,
        request_id: request_id.0.to_string(),
        billed,
        trail,
        snapshot_id: Some(snapshot_id),
    };
    service.annotate(&mut chunk);
    ChatStream::of(StreamEvent::End(Ending {
        chunk: Some(chunk),
        service,
        error: Some(error),
    }))
}
