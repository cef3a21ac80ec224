//! The accept loop: HTTP/1.1 over hyper, one task per connection, with
//! connection caps and a graceful drain.
//!
//! - At most `server.max_connections` connections are open, and at most
//!   `server.max_connections_per_ip` from one client address (an IPv6 client
//!   per /64; trusted proxies are not counted). A connection past a cap gets a
//!   503 in the documented shape and is closed.
//! - Each connection's read deadlines live in `connection.rs`; its requests
//!   run through the router, whose `admission.rs` middleware sheds load.
//! - Shutdown: `/readyz` turns 503 at once; after `server.shutdown_delay_ms`
//!   the drain starts: connections open until then finish the request they
//!   are serving (a stream until `[DONE]`) and close, and requests on
//!   connections accepted during the drain get 503 `shutting_down` and
//!   `Connection: close`. The loop returns when the connections from before
//!   the drain are gone.
//!
//! A connection that has not sent its first byte when the drain starts is
//! not closed, as hyper's graceful shutdown would do: its request may be in
//! flight already, and a fresh connection closed unanswered looks like a
//! failure to the client. It gets its answer (503 and `Connection: close`),
//! or the header deadline closes it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower::Service;

use super::admission::{Admission, Guarded};
use super::connection::{Activity, DeadlineIo, Timeouts};
use super::health::Readiness;
use super::{RequestId, ServerConfig};
use crate::error::ApiError;
use crate::rate_limit::TrustedProxy;

/// Refused connections being answered at once; past this a refused
/// connection is closed without an answer, so refusing stays cheap in a flood.
const MAX_REFUSALS_ANSWERING: usize = 256;
/// How long a refused connection is kept to read what the client sends:
/// closing with unread data would reset the connection and lose the answer.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// What serving shares with the handlers' layers: admission (load shedding,
/// the drain) and readiness (`/readyz`).
pub struct Lifecycle {
    pub admission: Arc<Admission>,
    pub readiness: Arc<Readiness>,
    /// Work deferred until a response has been written to its socket, run on
    /// the connection's task: what would delay an answer if done before it
    /// (waking a helper thread, say).
    pub after_response: Option<AfterResponse>,
}

/// See [`Lifecycle::after_response`].
pub type AfterResponse = Arc<dyn Fn() + Send + Sync>;

pub(super) async fn run(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    trusted_proxies: Vec<TrustedProxy>,
    lifecycle: Lifecycle,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Connections::new(router, config, trusted_proxies, lifecycle.after_response.clone());
    tollgate_telemetry::watch_serving(connections.open.clone(), lifecycle.admission.in_flight());

    // Every connection holds a receiver of `stage` until it ends; those from
    // before the drain also hold one of `before_drain`.
    let (stage, _) = watch::channel(Stage::Serving);
    let (before_drain, _) = watch::channel(());
    let delay = Duration::from_millis(config.shutdown_delay_ms);
    let stop = async {
        shutdown.await;
        lifecycle.readiness.stop();
        tracing::info!(
            delay_ms = config.shutdown_delay_ms,
            "shutting down: not ready from now on"
        );
        tokio::time::sleep(delay).await;
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => {
                connections.accept(accepted, stage.subscribe(), Some(before_drain.subscribe())).await
            }
        }
    }

    lifecycle.admission.drain();
    stage.send_replace(Stage::Draining);
    tracing::info!(
        connections = connections.open.load(Ordering::Relaxed),
        "draining: open requests finish, new ones get 503"
    );
    let drained = before_drain.closed();
    tokio::pin!(drained);
    loop {
        tokio::select! {
            () = &mut drained => break,
            accepted = listener.accept() => connections.accept(accepted, stage.subscribe(), None).await,
        }
    }
    drop(listener);
    // What is left only ever got 503s: idle connections close at once, an
    // answer being written is finished first.
    stage.send_replace(Stage::Closing);
    stage.closed().await;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Serving,
    /// Connections from before finish their request and close.
    Draining,
    /// Every connection left closes once its answer is written.
    Closing,
}

struct Connections {
    router: Router,
    http: hyper::server::conn::http1::Builder,
    timeouts: Timeouts,
    slots: Arc<Semaphore>,
    per_ip: Arc<PerIp>,
    trusted_proxies: Vec<TrustedProxy>,
    retry_after: u32,
    refusals: Arc<Semaphore>,
    open: Arc<AtomicUsize>,
    after_response: Option<AfterResponse>,
}

impl Connections {
    fn new(
        router: Router,
        config: &ServerConfig,
        trusted_proxies: Vec<TrustedProxy>,
        after_response: Option<AfterResponse>,
    ) -> Self {
        let mut http = hyper::server::conn::http1::Builder::new();
        // `connection.rs` times headers out, and tells them from the
        // keep-alive wait, which hyper's timeout does not.
        http.header_read_timeout(Option::<Duration>::None);
        Self {
            router,
            http,
            timeouts: Timeouts {
                header: config.header_read_timeout(),
                keep_alive: config.keep_alive_timeout(),
            },
            slots: Arc::new(Semaphore::new(config.max_connections)),
            per_ip: Arc::new(PerIp::new(config.max_connections_per_ip)),
            trusted_proxies,
            retry_after: config.shed_retry_after_secs,
            refusals: Arc::new(Semaphore::new(MAX_REFUSALS_ANSWERING)),
            open: Arc::new(AtomicUsize::new(0)),
            after_response,
        }
    }

    async fn accept(
        &self,
        accepted: io::Result<(TcpStream, SocketAddr)>,
        mut stage: watch::Receiver<Stage>,
        before_drain: Option<watch::Receiver<()>>,
    ) {
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => return accept_failed(error).await,
        };
        // Without it Nagle's algorithm holds small responses for the client's
        // delayed ACK (tens of milliseconds).
        let _ = stream.set_nodelay(true);
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return self.refuse(
                stream,
                "max_connections",
                "The gateway has its limit of open connections.",
            );
        };
        let per_ip = match crate::rate_limit::is_trusted(peer.ip(), &self.trusted_proxies) {
            true => None,
            false => match self.per_ip.admit(peer.ip()) {
                Ok(admitted) => admitted,
                Err(()) => {
                    return self.refuse(
                        stream,
                        "max_connections_per_ip",
                        "This client address has its limit of open connections.",
                    );
                }
            },
        };

        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(DeadlineIo::new(stream, activity.clone(), self.timeouts));
        let router = self.router.clone();
        let served = activity.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            served.request_started();
            let finished = RequestFinished(served.clone());
            // The peer address feeds per-client limits (sign-up).
            request.extensions_mut().insert(ConnectInfo(peer));
            let call = router.clone().call(request);
            async move {
                let response = call.await.unwrap_or_else(|never: Infallible| match never {});
                Ok::<_, Infallible>(response.map(|body| Body::new(Guarded { body, _guard: finished })))
            }
        });
        let connection = self.http.serve_connection(io, service);
        let held = (slot, per_ip, Open::new(&self.open), before_drain);
        let after_response = self.after_response.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            let mut closing = false;
            let ended = loop {
                tokio::select! {
                    ended = then_after_response(connection.as_mut(), &activity, after_response.as_ref()) => break ended,
                    changed = stage.changed(), if !closing => {
                        let now = match changed {
                            Ok(()) => *stage.borrow_and_update(),
                            Err(_) => Stage::Closing,
                        };
                        if now == Stage::Closing || !activity.awaiting_first_request() {
                            connection.as_mut().graceful_shutdown();
                            closing = true;
                        }
                    }
                }
            };
            if let Err(error) = ended {
                tracing::debug!(%peer, "connection ended: {error}");
            }
            drop((held, stage));
        });
    }

    /// Answers 503 on a connection past a cap and closes it, without reading
    /// a request; a client still sending gets the answer all the same.
    fn refuse(&self, mut stream: TcpStream, reason: &'static str, message: &str) {
        tollgate_telemetry::count_refused_connection(reason);
        tracing::debug!(reason, "connection refused");
        let Ok(answering) = self.refusals.clone().try_acquire_owned() else {
            return;
        };
        let answer = ApiError::refused(reason, message, self.retry_after)
            .with_request_id(&RequestId::new().0)
            .to_http1_bytes();
        tokio::spawn(async move {
            let _answering = answering;
            let _ = tokio::time::timeout(REFUSAL_LINGER, async {
                stream.write_all(&answer).await?;
                stream.shutdown().await?;
                let mut sink = [0u8; 4096];
                while stream.read(&mut sink).await? > 0 {}
                Ok::<_, io::Error>(())
            })
            .await;
        });
    }
}

/// Polls `connection`, then runs `after_response` if a request finished in
/// that poll. hyper writes a finished response to the socket within the
/// same poll, before it returns to wait for the next request, so the work
/// runs after the answer has left.
fn then_after_response<'a, F: Future + ?Sized>(
    mut connection: std::pin::Pin<&'a mut F>,
    activity: &'a Activity,
    after_response: Option<&'a AfterResponse>,
) -> impl Future<Output = F::Output> + 'a {
    std::future::poll_fn(move |cx| {
        let polled = connection.as_mut().poll(cx);
        if activity.take_finished()
            && let Some(after_response) = after_response
        {
            after_response();
        }
        polled
    })
}

/// Marks the connection's request done when the response body is.
struct RequestFinished(Arc<Activity>);

impl Drop for RequestFinished {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// One open connection, in the open-connections gauge.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Open(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// As axum's own loop does: errors about one connection are that
/// connection's; others (out of file descriptors) are waited out, since
/// connections closing will free some.
async fn accept_failed(error: io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!("accept failed: {error}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Open connections per client address.
struct PerIp {
    limit: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerIp {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// `Ok(None)` when there is no per-address limit; `Err` when `ip` is at it.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Option<PerIpSlot>, ()> {
        if self.limit == 0 {
            return Ok(None);
        }
        let key = client_key(ip);
        let mut open = self.open.lock().expect("per-ip map poisoned");
        let count = open.entry(key).or_insert(0);
        if *count >= self.limit {
            return Err(());
        }
        *count += 1;
        Ok(Some(PerIpSlot {
            per_ip: self.clone(),
            key,
        }))
    }
}

struct PerIpSlot {
    per_ip: Arc<PerIp>,
    key: IpAddr,
}

impl Drop for PerIpSlot {
    fn drop(&mut self) {
        let mut open = self.per_ip.open.lock().expect("per-ip map poisoned");
        if let Some(count) = open.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// An IPv6 client is counted per /64, the block one host usually gets, so
/// rotating addresses within it gains nothing.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_cap_and_ipv6_counts_per_64() {
        let per_ip = Arc::new(PerIp::new(2));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = per_ip.admit(a).unwrap();
        let _second = per_ip.admit(a).unwrap();
        assert!(per_ip.admit(a).is_err());
        assert!(per_ip.admit(b).unwrap().is_some(), "another address is not held back");
        drop(first);
        assert!(per_ip.admit(a).is_ok(), "a closed connection frees its place");

        let v6a: IpAddr = "2001:db8::1".parse().unwrap();
        let v6b: IpAddr = "2001:db8::ffff:1".parse().unwrap();
        let _one = per_ip.admit(v6a).unwrap();
        let _two = per_ip.admit(v6b).unwrap();
        assert!(per_ip.admit("2001:db8::2".parse().unwrap()).is_err(), "the same /64");
        assert!(per_ip.admit("2001:db8:0:1::1".parse().unwrap()).is_ok(), "another /64");

        let mapped: IpAddr = "::ffff:192.0.2.2".parse().unwrap();
        assert_eq!(client_key(mapped), b, "an IPv4-mapped address is the IPv4 client");
    }

    #[test]
    fn no_limit_keeps_no_count() {
        let per_ip = Arc::new(PerIp::new(0));
        assert!(per_ip.admit("192.0.2.1".parse().unwrap()).unwrap().is_none());
        assert!(per_ip.open.lock().unwrap().is_empty());
    }

    #[test]
    fn a_count_leaves_the_map_with_its_last_connection() {
        let per_ip = Arc::new(PerIp::new(5));
        let slots: Vec<_> = (0..3).map(|_| per_ip.admit("192.0.2.1".parse().unwrap())).collect();
        assert_eq!(per_ip.open.lock().unwrap().len(), 1);
        drop(slots);
        assert!(per_ip.open.lock().unwrap().is_empty());
    }
}
