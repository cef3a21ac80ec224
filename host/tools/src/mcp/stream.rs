//! A `tools/call` whose client takes an SSE answer: the tool's log lines
//! reach the client as `notifications/message` while it runs, and its
//! progress reports as `notifications/progress` (only when the request
//! carried `_meta.progressToken`, echoed as sent), then the result ends the
//! stream. In a session whose client declared the `elicitation` capability,
//! the tool's questions go out on the stream too, as `elicitation/create`
//! requests ([`elicit`](super::elicit) waits for their answers). The answer
//! stays plain JSON until the first notice to send (a line at the session's
//! `logging/setLevel` or above, else `info` and up; a progress report; a
//! question), so a quiet call answers as before; the transport lets the
//! server pick either per request.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tollgate_components::{LogLine, Progress};

use super::elicit::Asker;
use super::sessions::LOG_LEVELS;
use super::{CallCounter, Scope, answer, handle};

/// The level a session that set none gets.
const DEFAULT_LEVEL: &str = "info";

pub(super) async fn tool_call(mut scope: Scope, message: Value) -> Response {
    let (sink, lines) = mpsc::unbounded_channel();
    scope.sinks.logs = Some(sink);
    // Progress only for a client that asked, with its token echoed as sent.
    let token = message
        .pointer("/params/_meta/progressToken")
        .filter(|token| token.is_string() || token.is_number())
        .cloned();
    let progress = token.as_ref().map(|_| {
        let (sink, reports) = mpsc::unbounded_channel();
        scope.sinks.progress = Some(sink);
        reports
    });
    // Questions only to a session whose client can answer them.
    let requests = match &scope.session {
        Some(session) if session.elicits => {
            let (sink, requests) = mpsc::unbounded_channel();
            let limits = scope.components.installs.host().limits();
            scope.sinks.elicit = Some(Arc::new(Asker {
                elicitations: scope.components.elicitations.clone(),
                session_id: session.id.clone(),
                workspace_id: scope.caller.workspace_id.clone(),
                timeout: Duration::from_millis(limits.elicitation_timeout_ms),
                max_waiting: limits.max_waiting_elicitations,
                requests: sink,
            }));
            Some(requests)
        }
        _ => None,
    };
    let least = scope
        .session
        .as_ref()
        .map_or(DEFAULT_LEVEL.to_string(), |session| session.log_level.clone());
    let logger = message
        .pointer("/params/name")
        .and_then(Value::as_str)
        .unwrap_or("tool")
        .to_string();
    let mut notices = Notices {
        lines: Some(lines),
        progress,
        requests,
        least,
        logger,
        token: token.unwrap_or(Value::Null),
    };
    let mut work = tokio::spawn(async move {
        let mut counter = CallCounter::default();
        let reply = handle(&scope, message, &mut counter).await;
        (reply, counter.refused)
    });

    // Until the first notice to send, the answer may still be plain JSON.
    let first = tokio::select! {
        biased;
        notice = notices.next() => match notice {
            Some(notice) => notice,
            // The call dropped its sinks: only the reply is left.
            None => return json_answer(work.await),
        },
        done = &mut work => {
            let mut events = notices.pending();
            if events.is_empty() {
                return json_answer(done);
            }
            events.extend(final_event(done));
            return events_answer(futures_util::stream::iter(events.into_iter().map(Ok::<_, Infallible>)));
        }
    };

    // Streaming: notices as they come, then the reply. The call's sandbox may
    // outlive the reply (its store is dropped off the request path), so the
    // stream ends on the reply, not on the sinks closing.
    let (events, receiver) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        if events.send(first).await.is_err() {
            return;
        }
        let done = loop {
            tokio::select! {
                biased;
                Some(notice) = notices.next() => {
                    if events.send(notice).await.is_err() {
                        return;
                    }
                }
                done = &mut work => break done,
                // The client went away: dropping the notices tells a
                // question waiting for its answer at once.
                () = events.closed() => return,
            }
        };
        for notice in notices.pending() {
            let _ = events.send(notice).await;
        }
        if let Some(event) = final_event(done) {
            let _ = events.send(event).await;
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), receiver))
    });
    events_answer(stream)
}

/// A call's log lines (those at or above the session's level) and progress
/// reports, as the SSE events to send.
struct Notices {
    /// `None` once the call dropped its sink.
    lines: Option<mpsc::UnboundedReceiver<LogLine>>,
    progress: Option<mpsc::UnboundedReceiver<Progress>>,
    /// The tool's questions, as `elicitation/create` requests to send.
    requests: Option<mpsc::UnboundedReceiver<Value>>,
    least: String,
    logger: String,
    /// The request's `progressToken`, as the client sent it.
    token: Value,
}

impl Notices {
    /// The next notice to send; `None` once every sink is closed.
    async fn next(&mut self) -> Option<Bytes> {
        while self.lines.is_some() || self.progress.is_some() || self.requests.is_some() {
            tokio::select! {
                biased;
                request = recv(&mut self.requests) => match request {
                    Some(request) => return Some(event(&request)),
                    None => self.requests = None,
                },
                line = recv(&mut self.lines) => match line {
                    Some(line) if self.wanted(&line) => return Some(notification(&self.logger, &line)),
                    Some(_) => {}
                    None => self.lines = None,
                },
                report = recv(&mut self.progress) => match report {
                    Some(report) => return Some(progress_event(&self.token, &report)),
                    None => self.progress = None,
                },
            }
        }
        None
    }

    /// What was sent and not taken yet, without waiting.
    fn pending(&mut self) -> Vec<Bytes> {
        let mut events = Vec::new();
        if let Some(lines) = &mut self.lines {
            let lines: Vec<LogLine> = std::iter::from_fn(|| lines.try_recv().ok()).collect();
            let wanted = lines.iter().filter(|line| self.wanted(line));
            events.extend(wanted.map(|line| notification(&self.logger, line)));
        }
        if let Some(reports) = &mut self.progress {
            let reports: Vec<Progress> = std::iter::from_fn(|| reports.try_recv().ok()).collect();
            events.extend(reports.iter().map(|report| progress_event(&self.token, report)));
        }
        if let Some(requests) = &mut self.requests {
            events.extend(std::iter::from_fn(|| requests.try_recv().ok()).map(|request| event(&request)));
        }
        events
    }

    fn wanted(&self, line: &LogLine) -> bool {
        severity(line.level) >= severity(&self.least)
    }
}

/// The next message of a receiver that may be gone (then never ready, so
/// `select!` waits on the others).
async fn recv<T>(receiver: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

fn progress_event(token: &Value, report: &Progress) -> Bytes {
    let mut params = json!({"progressToken": token, "progress": report.progress});
    if let Some(total) = report.total {
        params["total"] = json!(total);
    }
    if let Some(message) = &report.message {
        params["message"] = json!(message);
    }
    event(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
}

fn severity(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

type Finished = Result<(Option<Value>, bool), tokio::task::JoinError>;

fn json_answer(done: Finished) -> Response {
    match done {
        Ok((Some(reply), refused)) => {
            let status = match refused {
                true => StatusCode::TOO_MANY_REQUESTS,
                false => StatusCode::OK,
            };
            answer(status, reply)
        }
        Ok((None, _)) => StatusCode::ACCEPTED.into_response(),
        Err(e) => {
            tracing::error!(error = %e, "an MCP tool call stopped");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// The reply as the stream's last event; nothing when the call panicked
/// (the client sees the stream end without a reply).
fn final_event(done: Finished) -> Option<Bytes> {
    match done {
        Ok((Some(reply), _)) => Some(event(&reply)),
        Ok((None, _)) => None,
        Err(e) => {
            tracing::error!(error = %e, "an MCP tool call stopped");
            None
        }
    }
}

fn notification(logger: &str, line: &LogLine) -> Bytes {
    event(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": line.level, "logger": logger, "data": line.message},
    }))
}

fn event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

fn events_answer<S>(stream: S) -> Response
where
    S: futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}
