//! The older HTTP+SSE transport (MCP revision 2024-11-05), for remotes that
//! still serve only it. A session is one `GET` event stream the gateway
//! holds open: its first event, `endpoint`, names the URL messages are
//! POSTed to (the remote answers each POST 202), and every response comes
//! back on the stream, matched to its request by id.
//!
//! The stream ending ends the session: requests waiting fail with
//! [`RemoteError::SessionGone`], so the caller opens a new one, as a 404
//! does on Streamable HTTP. The endpoint must be on the stream's own origin:
//! a remote cannot point the gateway's credential somewhere else.
//!
//! Requests the remote sends the gateway on the stream (`ping`, sampling)
//! and its notifications are not answered or relayed; the gateway declares
//! no client capabilities, so a remote has no cause to send them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;
use tokio::sync::oneshot;
use tollgate_components::Origin;
use tollgate_gateway::{FrameError, SseEvent};

use super::client::{Endpoint, RemoteError};

type Reply = Result<Value, RemoteError>;

/// One open event stream and the requests waiting on it.
pub struct Channel {
    post_url: url::Url,
    waiting: Arc<Waiting>,
    /// Stops reading the stream once the session is dropped.
    reader: tokio::task::AbortHandle,
}

#[derive(Default)]
struct Waiting {
    replies: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    closed: AtomicBool,
}

impl Waiting {
    /// Ends the session: every waiting request gets `why`'s error, and no
    /// other waits again.
    fn close(&self, why: impl Fn() -> RemoteError) {
        self.closed.store(true, Ordering::SeqCst);
        let waiting: Vec<_> = self.lock().drain().collect();
        for (_, reply) in waiting {
            let _ = reply.send(Err(why()));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Reply>>> {
        self.replies.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("post_url", &self.post_url.path())
            .finish()
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Forgets a request's waiter when its caller stops waiting (a timeout).
struct Waiter<'a> {
    waiting: &'a Waiting,
    id: u64,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.id);
    }
}

impl Channel {
    /// Opens the event stream on `endpoint.url` with `client` and waits for
    /// its `endpoint` event; the caller bounds the wait.
    pub(super) async fn open(endpoint: &Endpoint<'_>, client: &reqwest::Client) -> Result<Self, RemoteError> {
        let request = endpoint.authorized(client.get(endpoint.url.clone()).header(ACCEPT, "text/event-stream"));
        let response = request
            .send()
            .await
            .map_err(|e| RemoteError::Unreachable(e.without_url().to_string()))?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(RemoteError::Unauthorized);
        }
        if !status.is_success() {
            return Err(RemoteError::Protocol(format!("HTTP {status} opening the event stream")));
        }
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        if !kind.starts_with("text/event-stream") {
            return Err(RemoteError::Protocol(format!(
                "the sse transport's GET answered '{kind}', not an event stream"
            )));
        }
        let body = response
            .bytes_stream()
            .map(|chunk| chunk.map_err(reqwest::Error::without_url));
        let mut events = Box::pin(tollgate_gateway::sse_events(body));
        let post_url = loop {
            match events.next().await {
                Some(Ok(event)) if event.name.as_deref() == Some("endpoint") => {
                    break message_url(endpoint.url, &event.data)?;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(RemoteError::Protocol(e.to_string())),
                None => {
                    return Err(RemoteError::Protocol(
                        "the event stream ended before naming its message endpoint".into(),
                    ));
                }
            }
        };
        let waiting = Arc::new(Waiting::default());
        let reader = tokio::spawn(read(events, waiting.clone(), endpoint.max_bytes)).abort_handle();
        Ok(Self {
            post_url,
            waiting,
            reader,
        })
    }

    /// Posts `message`; for a request (`id` given), waits for its response
    /// on the stream, which the caller bounds.
    pub(super) async fn send(
        &self,
        endpoint: &Endpoint<'_>,
        client: &reqwest::Client,
        message: &Value,
        id: Option<u64>,
    ) -> Result<Option<Value>, RemoteError> {
        let waiter = match id {
            Some(id) => {
                let (sender, receiver) = oneshot::channel();
                self.waiting.lock().insert(id, sender);
                let waiter = Waiter {
                    waiting: &self.waiting,
                    id,
                };
                // Checked after the insert: a close that came first is seen
                // here, and one that comes later drains this waiter too.
                if self.waiting.closed.load(Ordering::SeqCst) {
                    return Err(RemoteError::SessionGone);
                }
                Some((waiter, receiver))
            }
            None => None,
        };
        let request = client
            .post(self.post_url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(message.to_string());
        let response = endpoint
            .authorized(request)
            .send()
            .await
            .map_err(|e| RemoteError::Unreachable(e.without_url().to_string()))?;
        match response.status() {
            status if status.is_success() => {}
            reqwest::StatusCode::NOT_FOUND => return Err(RemoteError::SessionGone),
            reqwest::StatusCode::UNAUTHORIZED => return Err(RemoteError::Unauthorized),
            status => return Err(RemoteError::Protocol(format!("HTTP {status} posting a message"))),
        }
        let Some((_waiter, receiver)) = waiter else {
            return Ok(None);
        };
        match receiver.await {
            Ok(reply) => reply.map(Some),
            Err(_) => Err(RemoteError::SessionGone),
        }
    }
}

/// The URL the `endpoint` event names, resolved against the stream's own;
/// it must be on the same origin.
fn message_url(stream: &url::Url, data: &[u8]) -> Result<url::Url, RemoteError> {
    let named = std::str::from_utf8(data)
        .map_err(|_| RemoteError::Protocol("the endpoint event is not UTF-8".into()))?
        .trim();
    let url = stream
        .join(named)
        .map_err(|e| RemoteError::Protocol(format!("the endpoint event's URL '{named}': {e}")))?;
    if Origin::of(&url) != Origin::of(stream) {
        return Err(RemoteError::Refused(format!(
            "the remote named a message endpoint on another origin ({}); the sse transport's endpoint must be on the stream's own",
            url.origin().ascii_serialization()
        )));
    }
    Ok(url)
}

/// Hands each response on the stream to the request waiting for it, until
/// the stream ends or breaks. An event over `max_bytes` ends the session:
/// the requests waiting fail with `TooLarge`.
async fn read<S>(mut events: std::pin::Pin<Box<S>>, waiting: Arc<Waiting>, max_bytes: usize)
where
    S: Stream<Item = Result<SseEvent, FrameError>>,
{
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!(%error, "a remote MCP server's event stream broke");
                break;
            }
        };
        if event.name.is_some() {
            continue;
        }
        if event.data.len() > max_bytes {
            waiting.close(|| RemoteError::TooLarge(max_bytes));
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&event.data) else {
            continue;
        };
        let Some(id) = message.get("id").and_then(Value::as_u64) else {
            continue;
        };
        if message.get("method").is_some() {
            continue;
        }
        if let Some(reply) = waiting.lock().remove(&id) {
            let _ = reply.send(Ok(message));
        }
    }
    waiting.close(|| RemoteError::SessionGone);
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use axum::Json;
    use axum::extract::State;
    use axum::response::sse::{Event, Sse};
    use events::ReceiverStream;
    use futures_util::Stream;
    use serde_json::{Value, json};
    use tokio::sync::mpsc;
    use tollgate_components::Egress;

    use super::message_url;
    use crate::remote::client::{Endpoint, RemoteError, Transport};

    /// The test server's side of its one event stream.
    type Outbox = Arc<Mutex<Option<mpsc::UnboundedSender<String>>>>;

    /// A remote on the sse transport that answers `initialize` and `ok`,
    /// answers `big` with more than the gateway reads, and never answers
    /// `hang`; `close` ends its event stream.
    async fn remote() -> String {
        let outbox: Outbox = Arc::default();
        async fn stream(State(outbox): State<Outbox>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
            let (sender, receiver) = mpsc::unbounded_channel();
            sender.send("endpoint:/messages?session=1".into()).unwrap();
            *outbox.lock().unwrap() = Some(sender);
            Sse::new(ReceiverStream(receiver))
        }
        async fn message(State(outbox): State<Outbox>, Json(message): Json<Value>) -> axum::http::StatusCode {
            let id = message["id"].clone();
            let result = match message["method"].as_str().unwrap_or("") {
                "initialize" => Some(json!({"protocolVersion": "2024-11-05", "capabilities": {},
                                            "serverInfo": {"name": "t", "version": "1"}})),
                "ok" => Some(json!({"ok": true})),
                "big" => Some(json!({"text": "x".repeat(2 << 20)})),
                "close" => {
                    outbox.lock().unwrap().take();
                    None
                }
                _ => None,
            };
            if let (Some(result), Some(outbox)) = (result, outbox.lock().unwrap().as_ref()) {
                // A notification first: the reader must skip it.
                outbox
                    .send(json!({"jsonrpc": "2.0", "method": "notifications/message"}).to_string())
                    .unwrap();
                outbox
                    .send(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
                    .unwrap();
            }
            axum::http::StatusCode::ACCEPTED
        }
        let app = axum::Router::new()
            .route("/sse", axum::routing::get(stream))
            .route("/messages", axum::routing::post(message))
            .with_state(outbox);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        origin
    }

    /// The test server's event stream: each text sent is one event, and one
    /// prefixed `endpoint:` is the `endpoint` event.
    mod events {
        use std::convert::Infallible;
        use std::pin::Pin;
        use std::task::{Context, Poll};

        use axum::response::sse::Event;
        use futures_util::Stream;
        use tokio::sync::mpsc::UnboundedReceiver;

        pub struct ReceiverStream(pub UnboundedReceiver<String>);

        impl Stream for ReceiverStream {
            type Item = Result<Event, Infallible>;
            fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
                self.0.poll_recv(cx).map(|next| {
                    next.map(|text| {
                        Ok(match text.strip_prefix("endpoint:") {
                            Some(url) => Event::default().event("endpoint").data(url),
                            None => Event::default().data(text),
                        })
                    })
                })
            }
        }
    }

    #[tokio::test]
    async fn a_response_too_large_or_never_sent_fails_only_its_request() {
        let origin = remote().await;
        let egress = Egress::new(std::slice::from_ref(&origin)).unwrap();
        let url = url::Url::parse(&format!("{origin}/sse")).unwrap();
        let endpoint = Endpoint {
            url: &url,
            transport: Transport::Sse,
            auth: None,
            egress: &egress,
            timeout_ms: 400,
            max_bytes: 1 << 20,
        };
        let upstream = endpoint.initialize().await.unwrap();
        assert_eq!(upstream.protocol_version, "2024-11-05");
        let ok = endpoint.request(&upstream, "ok", json!({})).await.unwrap();
        assert_eq!(ok, json!({"ok": true}));

        let hang = endpoint.request(&upstream, "hang", json!({})).await;
        assert!(matches!(hang, Err(RemoteError::Timeout(400))), "{hang:?}");
        let ok = endpoint.request(&upstream, "ok", json!({})).await;
        assert!(ok.is_ok(), "a timeout ends only its own request: {ok:?}");

        let big = endpoint.request(&upstream, "big", json!({})).await;
        assert!(matches!(big, Err(RemoteError::TooLarge(_))), "{big:?}");
        let after = endpoint.request(&upstream, "ok", json!({})).await;
        assert!(
            matches!(after, Err(RemoteError::SessionGone)),
            "an oversized event ends the session: {after:?}"
        );

        let fresh = endpoint.initialize().await.unwrap();
        assert!(endpoint.request(&fresh, "ok", json!({})).await.is_ok());
        let closed = endpoint.request(&fresh, "close", json!({})).await;
        assert!(
            matches!(closed, Err(RemoteError::SessionGone)),
            "the stream's end is the session's: {closed:?}"
        );
    }

    #[test]
    fn the_message_endpoint_is_resolved_on_the_streams_origin_only() {
        let stream = url::Url::parse("http://127.0.0.1:9000/mcp/sse").unwrap();
        let url = message_url(&stream, b"/mcp/messages/?session_id=ab12").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:9000/mcp/messages/?session_id=ab12");
        let relative = message_url(&stream, b" messages?s=1\n").unwrap();
        assert_eq!(relative.as_str(), "http://127.0.0.1:9000/mcp/messages?s=1");
        for elsewhere in [
            "http://127.0.0.1:9001/messages",
            "https://127.0.0.1:9000/messages",
            "//evil.example/messages",
        ] {
            let refused = message_url(&stream, elsewhere.as_bytes());
            assert!(refused.is_err(), "{elsewhere} was accepted");
        }
    }
}
