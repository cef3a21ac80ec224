//! Which requests the gateway takes on, and how long it waits for their
//! bodies ([`admit`], a middleware inside the request-id one):
//!
//! - **Load shedding.** At most `server.max_in_flight` requests are served at
//!   once, a streamed answer counting until its last byte. Past that a request
//!   gets 503 `gateway_overloaded` with `Retry-After` at once, instead of
//!   queueing without bound, so the latency of those admitted stays that of
//!   the work itself. While the gateway drains for shutdown every new request
//!   gets 503 `shutting_down`. `/healthz` and `/readyz` are never refused.
//! - **Body deadlines.** A request body must keep arriving: at most
//!   `server.body_idle_timeout_ms` between chunks and
//!   `server.body_timeout_ms` in all. When either passes while the handler
//!   reads the body, whatever the handler made of the read error is replaced
//!   by a 408 in the documented shape, and the connection is closed.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::ServerConfig;
use super::health::is_health_check;
use crate::error::ApiError;
use crate::server::RequestId;

pub struct Admission {
    in_flight: Arc<AtomicUsize>,
    max_in_flight: usize,
    retry_after: u32,
    body_idle: Duration,
    body_total: Duration,
    draining: AtomicBool,
}

impl Admission {
    pub fn new(config: &ServerConfig) -> Self {
        Self {
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: config.max_in_flight,
            retry_after: config.shed_retry_after_secs,
            body_idle: config.body_idle_timeout(),
            body_total: config.body_timeout(),
            draining: AtomicBool::new(false),
        }
    }

    /// Requests being served now, for the in-flight gauge.
    pub fn in_flight(&self) -> Arc<AtomicUsize> {
        self.in_flight.clone()
    }

    /// From now on every new request is refused with 503 `shutting_down`.
    pub(super) fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    fn enter(&self) -> Result<Ticket, Refusal> {
        let before = self.in_flight.fetch_add(1, Ordering::Relaxed);
        let ticket = Ticket(self.in_flight.clone());
        if self.draining.load(Ordering::Relaxed) {
            return Err(Refusal::ShuttingDown);
        }
        if before >= self.max_in_flight {
            return Err(Refusal::Overloaded);
        }
        Ok(ticket)
    }

    fn refusal(&self, refusal: Refusal, request_id: &RequestId) -> Response {
        let error = match refusal {
            Refusal::ShuttingDown => ApiError::refused(
                "shutting_down",
                "The gateway is shutting down; send the request again, it will reach another instance or this one restarted.",
                self.retry_after,
            ),
            Refusal::Overloaded => ApiError::refused(
                "gateway_overloaded",
                format!(
                    "The gateway is serving its limit of {} requests at once; try again shortly.",
                    self.max_in_flight
                ),
                self.retry_after,
            ),
        };
        tollgate_telemetry::count_shed(refusal.reason());
        let mut response = error.with_request_id(&request_id.0).into_response();
        if refusal == Refusal::ShuttingDown {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Refusal {
    ShuttingDown,
    Overloaded,
}

impl Refusal {
    /// As the shed-requests metric names it.
    fn reason(self) -> &'static str {
        match self {
            Refusal::ShuttingDown => "shutting_down",
            Refusal::Overloaded => "overloaded",
        }
    }
}

/// One admitted request; it leaves the in-flight count when dropped.
struct Ticket(Arc<AtomicUsize>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub async fn admit(State(admission): State<Arc<Admission>>, request: Request, next: Next) -> Response {
    if is_health_check(request.uri().path()) {
        let mut response = next.run(request).await;
        // A connection kept alive by probes would hold the drain up.
        if admission.draining.load(Ordering::Relaxed) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        return response;
    }
    let request_id = request.extensions().get::<RequestId>().cloned().unwrap_or_default();
    let ticket = match admission.enter() {
        Ok(ticket) => ticket,
        Err(refusal) => return admission.refusal(refusal, &request_id),
    };
    let mut expired = None;
    let request = match request.body().is_end_stream() {
        true => request,
        false => {
            let flag = Arc::new(AtomicU8::new(NOT_EXPIRED));
            expired = Some(flag.clone());
            request.map(|body| {
                Body::new(ReadDeadlines::new(
                    body,
                    admission.body_idle,
                    admission.body_total,
                    flag,
                ))
            })
        }
    };
    let response = next.run(request).await;
    if let Some(which) = expired.and_then(|flag| Expired::of(flag.load(Ordering::Relaxed))) {
        tollgate_telemetry::count_timeout(which.metric());
        let mut response = ApiError::request_timeout(which.message(&admission))
            .with_request_id(&request_id.0)
            .into_response();
        // The rest of the body was never read, so the connection cannot be reused.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    response.map(|body| Body::new(Guarded { body, _guard: ticket }))
}

/// A response body holding `G` until the body is done (or dropped unfinished).
pub(super) struct Guarded<G> {
    pub body: Body,
    pub _guard: G,
}

impl<G: Unpin + Send + 'static> HttpBody for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

const NOT_EXPIRED: u8 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Expired {
    Idle = 1,
    Total = 2,
}

impl Expired {
    fn of(value: u8) -> Option<Self> {
        match value {
            1 => Some(Expired::Idle),
            2 => Some(Expired::Total),
            _ => None,
        }
    }

    fn metric(self) -> &'static str {
        match self {
            Expired::Idle => "body_idle",
            Expired::Total => "body",
        }
    }

    fn message(self, admission: &Admission) -> String {
        match self {
            Expired::Idle => format!(
                "The request body stopped arriving for {} ms.",
                admission.body_idle.as_millis()
            ),
            Expired::Total => format!(
                "The request body did not arrive within {} ms.",
                admission.body_total.as_millis()
            ),
        }
    }
}

/// A request body that fails with a timeout when no chunk arrives within
/// `idle`, or the whole body not within `total`, and records which in
/// `expired`. tower-http's `TimeoutBody` has the idle deadline only, and its
/// error cannot tell the middleware to answer 408.
struct ReadDeadlines {
    body: Body,
    idle: Duration,
    cap: Instant,
    sleep: Pin<Box<Sleep>>,
    expired: Arc<AtomicU8>,
}

impl ReadDeadlines {
    fn new(body: Body, idle: Duration, total: Duration, expired: Arc<AtomicU8>) -> Self {
        let now = Instant::now();
        let cap = now + total;
        Self {
            body,
            idle,
            cap,
            sleep: Box::pin(tokio::time::sleep_until((now + idle).min(cap))),
            expired,
        }
    }
}

impl HttpBody for ReadDeadlines {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            if matches!(frame, Some(Ok(_))) {
                let next = (Instant::now() + this.idle).min(this.cap);
                this.sleep.as_mut().reset(next);
            }
            return Poll::Ready(frame);
        }
        if this.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let which = match Instant::now() >= this.cap {
            true => Expired::Total,
            false => Expired::Idle,
        };
        this.expired.store(which as u8, Ordering::Relaxed);
        Poll::Ready(Some(Err(axum::Error::new(io::Error::new(
            io::ErrorKind::TimedOut,
            "the request body timed out",
        )))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    /// A body whose chunks arrive `gaps` apart.
    fn trickle(gaps: &'static [u64]) -> Body {
        let chunks = futures_util::stream::iter(gaps).then(|gap| async move {
            tokio::time::sleep(Duration::from_millis(*gap)).await;
            Ok::<_, io::Error>(Bytes::from_static(b"x"))
        });
        Body::from_stream(chunks)
    }

    async fn read(gaps: &'static [u64]) -> (Result<usize, String>, Option<Expired>) {
        let flag = Arc::new(AtomicU8::new(NOT_EXPIRED));
        let body = ReadDeadlines::new(
            trickle(gaps),
            Duration::from_millis(500),
            Duration::from_millis(2_000),
            flag.clone(),
        );
        let read = axum::body::to_bytes(Body::new(body), usize::MAX)
            .await
            .map(|all| all.len())
            .map_err(|e| format!("{e:?}"));
        (read, Expired::of(flag.load(Ordering::Relaxed)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_arriving_within_both_deadlines_is_read_whole() {
        assert_eq!(read(&[400, 400, 400, 400]).await, (Ok(4), None));
    }

    #[tokio::test(start_paused = true)]
    async fn a_gap_longer_than_the_idle_deadline_fails_the_read() {
        let (read, expired) = read(&[100, 600, 100]).await;
        assert!(read.unwrap_err().contains("timed out"));
        assert_eq!(expired, Some(Expired::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_trickled_within_the_idle_deadline_still_meets_the_overall_one() {
        let (read, expired) = read(&[400, 400, 400, 400, 400, 400, 400]).await;
        assert!(read.is_err());
        assert_eq!(expired, Some(Expired::Total));
    }
}
