//! A `tools/call` whose client takes an SSE answer: the tool's log lines
//! reach the client as `notifications/message` while it runs, then the
//! result ends the stream. The answer stays plain JSON until the first line
//! the session wants (its `logging/setLevel`, else `info` and up), so a
//! call that logs nothing answers as before; the transport lets the server
//! pick either per request.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tollgate_components::LogLine;

use super::sessions::LOG_LEVELS;
use super::{CallCounter, Scope, answer, handle};

/// The level a session that set none gets.
const DEFAULT_LEVEL: &str = "info";

pub(super) async fn tool_call(mut scope: Scope, message: Value) -> Response {
    let (sink, mut lines) = mpsc::unbounded_channel();
    scope.logs = Some(sink);
    let least = scope
        .session
        .as_ref()
        .map_or(DEFAULT_LEVEL.to_string(), |session| session.log_level.clone());
    let wanted = move |line: &LogLine| severity(line.level) >= severity(&least);
    let logger = message
        .pointer("/params/name")
        .and_then(Value::as_str)
        .unwrap_or("tool")
        .to_string();
    let mut work = tokio::spawn(async move {
        let mut counter = CallCounter::default();
        let reply = handle(&scope, message, &mut counter).await;
        (reply, counter.refused)
    });

    // Until the first wanted line, the answer may still be plain JSON.
    let first = loop {
        tokio::select! {
            biased;
            line = lines.recv() => match line {
                Some(line) if wanted(&line) => break line,
                Some(_) => continue,
                // The call dropped its sink: only the reply is left.
                None => return json_answer(work.await),
            },
            done = &mut work => {
                let pending: Vec<LogLine> = std::iter::from_fn(|| lines.try_recv().ok()).filter(|l| wanted(l)).collect();
                if pending.is_empty() {
                    return json_answer(done);
                }
                let mut events: Vec<Bytes> = pending.iter().map(|line| notification(&logger, line)).collect();
                events.extend(final_event(done));
                return events_answer(futures_util::stream::iter(events.into_iter().map(Ok::<_, Infallible>)));
            }
        }
    };

    // Streaming: lines as they come, then the reply. The call's sandbox may
    // outlive the reply (its store is dropped off the request path), so the
    // stream ends on the reply, not on the sink closing.
    let (events, receiver) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        if events.send(notification(&logger, &first)).await.is_err() {
            return;
        }
        let done = loop {
            tokio::select! {
                biased;
                Some(line) = lines.recv() => {
                    if wanted(&line) && events.send(notification(&logger, &line)).await.is_err() {
                        return;
                    }
                }
                done = &mut work => break done,
            }
        };
        for line in std::iter::from_fn(|| lines.try_recv().ok()).filter(|l| wanted(l)) {
            let _ = events.send(notification(&logger, &line)).await;
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
