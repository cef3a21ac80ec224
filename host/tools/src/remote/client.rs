//! The gateway as an MCP client of one remote server. Over Streamable HTTP
//! each JSON-RPC request is one POST, answered with JSON or with an SSE
//! stream that ends in the response. The remote's `Mcp-Session-Id` from
//! `initialize` rides on every later request; a 404 for that session means
//! the remote forgot it, and the caller initializes again. Over the older
//! HTTP+SSE transport a session is an event stream the gateway holds open
//! ([`super::sse`]); its end is the session's.
//!
//! Every request goes out on the client the components' egress policy hands
//! out for the URL (internal addresses only where the operator allowed
//! them, no redirects, no proxy), within `components.http_timeout_ms` for
//! the whole exchange and `components.http_max_body_bytes` for the answer,
//! so a remote that hangs or floods fails that call only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tollgate_components::{Egress, Origin};

use super::sse::Channel;

/// The revision the gateway asks a remote for; it also speaks what the
/// remote answers, if it is one the server side speaks.
pub const CLIENT_VERSION: &str = "2025-06-18";

/// Why a remote request failed, in words a caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{0}")]
    Refused(String),
    #[error("the remote MCP server did not answer within {0} ms")]
    Timeout(u64),
    #[error("the remote MCP server's answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the remote MCP server could not be reached: {0}")]
    Unreachable(String),
    /// The remote no longer knows the session (404): initialize again.
    #[error("the remote MCP server ended the session")]
    SessionGone,
    /// The remote refused the credential (401).
    #[error("the remote MCP server refused the gateway's credential (HTTP 401)")]
    Unauthorized,
    #[error("the remote MCP server answered badly: {0}")]
    Protocol(String),
    /// A JSON-RPC error the remote answered.
    #[error("the remote MCP server answered error {code}: {message}")]
    Rpc { code: i64, message: String },
}

/// How a remote is reached, as `mcp_servers.create` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// `streamable-http`: one POST per message (MCP 2025-03-26 on).
    StreamableHttp,
    /// `sse`: an event stream and a message endpoint (MCP 2024-11-05).
    Sse,
}

impl Transport {
    pub const NAMES: [&str; 2] = ["streamable-http", "sse"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "streamable-http" => Some(Self::StreamableHttp),
            "sse" => Some(Self::Sse),
            _ => None,
        }
    }
}

/// An agreed session with the remote.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// `None` when the remote serves without sessions.
    pub session: Option<String>,
    pub protocol_version: String,
    /// The `sse` transport's open event stream, which is the session.
    channel: Option<Arc<Channel>>,
}

/// Where and how to reach one remote, with its credential opened.
pub struct Endpoint<'a> {
    pub url: &'a url::Url,
    pub transport: Transport,
    pub auth: Option<(HeaderName, HeaderValue)>,
    pub egress: &'a Egress,
    pub timeout_ms: u64,
    pub max_bytes: usize,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Endpoint<'_> {
    /// `initialize`, then `notifications/initialized`: a new session.
    pub async fn initialize(&self) -> Result<Upstream, RemoteError> {
        let params = json!({
            "protocolVersion": CLIENT_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "tollgate", "version": env!("CARGO_PKG_VERSION")},
        });
        let channel = match self.transport {
            Transport::Sse => Some(Arc::new(self.bounded(self.open_channel()).await?)),
            Transport::StreamableHttp => None,
        };
        let (result, session) = self
            .exchange(None, channel.as_deref(), "initialize", Some(params))
            .await?;
        let protocol_version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|version| crate::mcp::PROTOCOL_VERSIONS.contains(version))
            .ok_or_else(|| {
                RemoteError::Protocol(format!("initialize agreed no revision this gateway speaks: {result}"))
            })?
            .to_string();
        let upstream = Upstream {
            session,
            protocol_version,
            channel,
        };
        self.exchange(
            Some(&upstream),
            upstream.channel.as_deref(),
            "notifications/initialized",
            None,
        )
        .await?;
        Ok(upstream)
    }

    /// One request in `upstream`'s session; answers the result.
    pub async fn request(&self, upstream: &Upstream, method: &str, params: Value) -> Result<Value, RemoteError> {
        Ok(self
            .exchange(Some(upstream), upstream.channel.as_deref(), method, Some(params))
            .await?
            .0)
    }

    async fn open_channel(&self) -> Result<Channel, RemoteError> {
        Channel::open(self, self.client()?).await
    }

    /// `request` with the credential, when the remote has one.
    pub(super) fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.auth {
            Some((name, value)) => request.header(name, value.clone()),
            None => request,
        }
    }

    /// The client the egress policy hands out for the remote's URL.
    fn client(&self) -> Result<&reqwest::Client, RemoteError> {
        let origin =
            Origin::of(self.url).ok_or_else(|| RemoteError::Refused(format!("{} is not an http(s) URL", self.url)))?;
        self.egress.client_for(&origin, self.url).ok_or_else(|| {
            RemoteError::Refused(format!(
                "{origin} is an internal address the operator has not allowed ([components] allow_internal_origins)"
            ))
        })
    }

    /// `work` within the remote's timeout.
    async fn bounded<T>(&self, work: impl Future<Output = Result<T, RemoteError>>) -> Result<T, RemoteError> {
        let timeout = Duration::from_millis(self.timeout_ms);
        match tokio::time::timeout(timeout, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(RemoteError::Timeout(self.timeout_ms)),
        }
    }

    /// Sends one message (a notification when `params` is `None`), within
    /// the timeout; answers the result and the session id the remote set.
    async fn exchange(
        &self,
        upstream: Option<&Upstream>,
        channel: Option<&Channel>,
        method: &str,
        params: Option<Value>,
    ) -> Result<(Value, Option<String>), RemoteError> {
        self.bounded(self.send(upstream, channel, method, params)).await
    }

    async fn send(
        &self,
        upstream: Option<&Upstream>,
        channel: Option<&Channel>,
        method: &str,
        params: Option<Value>,
    ) -> Result<(Value, Option<String>), RemoteError> {
        let client = self.client()?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let message = match &params {
            Some(params) => json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            None => json!({"jsonrpc": "2.0", "method": method}),
        };
        if let Some(channel) = channel {
            return match channel
                .send(self, client, &message, params.is_some().then_some(id))
                .await?
            {
                Some(reply) => Ok((result_of(reply, id)?, None)),
                None => Ok((Value::Null, None)),
            };
        }
        let mut request = self.authorized(
            client
                .post(self.url.clone())
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json, text/event-stream")
                .body(message.to_string()),
        );
        if let Some(upstream) = upstream {
            request = request.header("mcp-protocol-version", &upstream.protocol_version);
            if let Some(session) = &upstream.session {
                request = request.header(crate::mcp::SESSION_HEADER, session);
            }
        }
        // reqwest's errors are shown without their URL (it may hold a secret).
        let response = request
            .send()
            .await
            .map_err(|e| RemoteError::Unreachable(e.without_url().to_string()))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && upstream.is_some_and(|u| u.session.is_some()) {
            return Err(RemoteError::SessionGone);
        }
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(RemoteError::Unauthorized);
        }
        if !status.is_success() {
            return Err(RemoteError::Protocol(format!("HTTP {status} for {method}")));
        }
        let session = response
            .headers()
            .get(crate::mcp::SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let events = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|kind| kind.starts_with("text/event-stream"));
        if params.is_none() {
            // A notification: the remote answers 202 and nothing to read.
            return Ok((Value::Null, session));
        }
        let body = self.read_capped(response).await?;
        let reply = match events {
            true => reply_in_events(&body, id)?,
            false => serde_json::from_slice(&body).map_err(|e| RemoteError::Protocol(format!("not JSON: {e}")))?,
        };
        Ok((result_of(reply, id)?, session))
    }

    async fn read_capped(&self, response: reqwest::Response) -> Result<Vec<u8>, RemoteError> {
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| RemoteError::Unreachable(e.without_url().to_string()))?;
            if body.len() + chunk.len() > self.max_bytes {
                return Err(RemoteError::TooLarge(self.max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// The response to request `id` among an SSE answer's events (the remote
/// may send notifications first; the gateway does not relay them yet).
fn reply_in_events(body: &[u8], id: u64) -> Result<Value, RemoteError> {
    let text = String::from_utf8_lossy(body);
    for event in text.replace("\r\n", "\n").split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.strip_prefix(' ').unwrap_or(data))
            .collect();
        if data.is_empty() {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&data.join("\n")) else {
            continue;
        };
        if message.get("id") == Some(&json!(id)) {
            return Ok(message);
        }
    }
    Err(RemoteError::Protocol(
        "the event stream ended without the response".into(),
    ))
}

fn result_of(mut reply: Value, id: u64) -> Result<Value, RemoteError> {
    if reply.get("id") != Some(&json!(id)) {
        return Err(RemoteError::Protocol(format!("the response is not for request {id}")));
    }
    if let Some(error) = reply.get("error") {
        return Err(RemoteError::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
        });
    }
    reply
        .get_mut("result")
        .map(Value::take)
        .ok_or_else(|| RemoteError::Protocol("a response with neither result nor error".into()))
}

#[cfg(test)]
mod tests {
    use super::{RemoteError, reply_in_events, result_of};
    use serde_json::json;

    #[test]
    fn the_response_is_found_among_an_event_streams_notifications() {
        let body = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\n\
                    id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{\"ok\":true}}\n\n";
        let reply = reply_in_events(body.as_bytes(), 7).unwrap();
        assert_eq!(result_of(reply, 7).unwrap(), json!({"ok": true}));
        let other = reply_in_events(body.as_bytes(), 8);
        assert!(matches!(other, Err(RemoteError::Protocol(_))), "{other:?}");
    }

    #[test]
    fn an_error_or_a_foreign_id_is_not_a_result() {
        let error = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "no"}});
        assert!(matches!(
            result_of(error, 3),
            Err(RemoteError::Rpc { code: -32602, .. })
        ));
        let foreign = json!({"jsonrpc": "2.0", "id": 4, "result": {}});
        assert!(matches!(result_of(foreign, 3), Err(RemoteError::Protocol(_))));
    }
}
