//! Read deadlines of one client connection, enforced where hyper reads the
//! socket: [`DeadlineIo`] wraps the TCP stream, and [`Activity`] (shared with
//! the connection's service) says what the connection is waiting for.
//!
//! - A fresh connection, or one whose next request has begun to arrive, must
//!   deliver the request's headers within `server.header_read_timeout_ms`,
//!   counted from the acceptance or from the request's first byte (so trickling
//!   a byte now and then buys nothing). A client that sent part of a request
//!   gets a 408 in the documented shape; then the connection closes.
//! - A connection idle between requests closes after
//!   `server.keep_alive_timeout_ms`.
//! - While a request is being served there is no deadline here: the body has
//!   its own (`admission.rs`) and a stream may rightly run for minutes.
//!
//! hyper's own `header_read_timeout` is not used: it also times out the wait
//! between keep-alive requests, and it closes without an answer.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::error::ApiError;
use crate::server::RequestId;

/// Nothing received yet on a fresh connection.
const AWAITING: u8 = 0;
/// Part of a request's head received.
const HEAD: u8 = 1;
/// A request is being served.
const BUSY: u8 = 2;
/// Between requests on a kept-alive connection.
const IDLE: u8 = 3;

/// What a connection is waiting for, and since when. Every access happens on
/// the connection's own task (hyper polls the socket, the service and the
/// response body there), so relaxed atomics suffice; they are atomics only to
/// be shared with the service.
pub(super) struct Activity {
    origin: Instant,
    state: AtomicU8,
    /// Nanoseconds from `origin` to the start of the current state's wait.
    since: AtomicU64,
    /// The last pending read. hyper may poll the socket while a request is
    /// served (no deadline then) and not again until it is woken, so the
    /// keep-alive wait must wake it to set its deadline.
    reader: AtomicWaker,
    /// A request finished since [`Activity::take_finished`] last looked.
    finished: AtomicBool,
}

impl Activity {
    pub(super) fn new() -> Self {
        Self {
            origin: Instant::now(),
            state: AtomicU8::new(AWAITING),
            since: AtomicU64::new(0),
            reader: AtomicWaker::new(),
            finished: AtomicBool::new(false),
        }
    }

    /// Nothing has been received yet on this fresh connection.
    pub(super) fn awaiting_first_request(&self) -> bool {
        self.state.load(Ordering::Relaxed) == AWAITING
    }

    /// hyper parsed a request's head and calls the service.
    pub(super) fn request_started(&self) {
        self.state.store(BUSY, Ordering::Relaxed);
    }

    /// The response has been sent (or abandoned): the keep-alive wait starts.
    pub(super) fn request_finished(&self) {
        self.since.store(self.elapsed(), Ordering::Relaxed);
        self.state.store(IDLE, Ordering::Relaxed);
        self.finished.store(true, Ordering::Relaxed);
        self.reader.wake();
    }

    /// Whether a request finished since the last call.
    pub(super) fn take_finished(&self) -> bool {
        self.finished.swap(false, Ordering::Relaxed)
    }

    fn received(&self) {
        match self.state.load(Ordering::Relaxed) {
            // The header deadline keeps counting from the acceptance.
            AWAITING => self.state.store(HEAD, Ordering::Relaxed),
            IDLE => {
                self.since.store(self.elapsed(), Ordering::Relaxed);
                self.state.store(HEAD, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    fn elapsed(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    fn deadline(&self, timeouts: &Timeouts) -> Option<(Instant, u8)> {
        let state = self.state.load(Ordering::Relaxed);
        let wait = match state {
            AWAITING | HEAD => timeouts.header,
            IDLE => timeouts.keep_alive,
            _ => return None,
        };
        let since = Duration::from_nanos(self.since.load(Ordering::Relaxed));
        Some((self.origin + since + wait, state))
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Timeouts {
    pub header: Duration,
    pub keep_alive: Duration,
}

/// The client's TCP stream with the connection's read deadlines.
pub(super) struct DeadlineIo {
    inner: TcpStream,
    activity: Arc<Activity>,
    timeouts: Timeouts,
    sleep: Pin<Box<Sleep>>,
    /// Once a deadline has passed, every read says so again.
    expired: Option<u8>,
}

impl DeadlineIo {
    pub(super) fn new(inner: TcpStream, activity: Arc<Activity>, timeouts: Timeouts) -> Self {
        let sleep = Box::pin(tokio::time::sleep_until(activity.origin + timeouts.header));
        Self {
            inner,
            activity,
            timeouts,
            sleep,
            expired: None,
        }
    }

    /// The socket has nothing to read: is the connection past its deadline?
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((deadline, state)) = self.activity.deadline(&self.timeouts) else {
            self.activity.reader.register(cx.waker());
            return Poll::Pending;
        };
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
        ready!(self.sleep.as_mut().poll(cx));
        self.expire(state)
    }

    fn expire(&mut self, state: u8) -> Poll<io::Result<()>> {
        let first = self.expired.replace(state).is_none();
        match state {
            HEAD => {
                if first {
                    tollgate_telemetry::count_timeout("header");
                    let answer = ApiError::request_timeout(format!(
                        "The request headers did not arrive within {} ms.",
                        self.timeouts.header.as_millis()
                    ))
                    .with_request_id(&RequestId::new().0);
                    // Best effort, and it fits: nothing else is being written
                    // on a connection still reading a request's head.
                    let _ = self.inner.try_write(&answer.to_http1_bytes());
                }
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "request headers timed out",
                )))
            }
            // Nothing was asked, so nothing is answered: end of stream, which
            // hyper takes as the connection closing cleanly.
            _ => {
                if first {
                    tollgate_telemetry::count_timeout(if state == IDLE { "keep_alive" } else { "header" });
                }
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl AsyncRead for DeadlineIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(state) = this.expired {
            return this.expire(state);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.activity.received();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => this.poll_deadline(cx),
        }
    }
}

impl AsyncWrite for DeadlineIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUTS: Timeouts = Timeouts {
        header: Duration::from_secs(10),
        keep_alive: Duration::from_secs(60),
    };

    #[tokio::test(start_paused = true)]
    async fn the_deadline_follows_what_the_connection_waits_for() {
        let activity = Activity::new();
        let start = activity.origin;
        assert_eq!(activity.deadline(&TIMEOUTS), Some((start + TIMEOUTS.header, AWAITING)));

        tokio::time::advance(Duration::from_secs(4)).await;
        activity.received();
        assert_eq!(
            activity.deadline(&TIMEOUTS),
            Some((start + TIMEOUTS.header, HEAD)),
            "the first request's header deadline counts from the acceptance"
        );

        activity.request_started();
        assert_eq!(
            activity.deadline(&TIMEOUTS),
            None,
            "a request being served has none here"
        );

        tokio::time::advance(Duration::from_secs(30)).await;
        activity.request_finished();
        let finished = Instant::now();
        assert_eq!(
            activity.deadline(&TIMEOUTS),
            Some((finished + TIMEOUTS.keep_alive, IDLE))
        );

        tokio::time::advance(Duration::from_secs(5)).await;
        activity.received();
        activity.received();
        assert_eq!(
            activity.deadline(&TIMEOUTS),
            Some((finished + Duration::from_secs(5) + TIMEOUTS.header, HEAD)),
            "the next request's header deadline counts from its first byte, not from later ones"
        );
    }
}
