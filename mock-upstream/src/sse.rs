//! Plays a prepared list of server-sent-event frames, with optional pacing
//! and an abrupt end. Protocol modules decide what the frames say.

use std::io;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;

/// `data: <payload>\n\n`.
pub fn data_frame(payload: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(payload.len() + 8);
    frame.extend_from_slice(b"data: ");
    frame.extend_from_slice(payload);
    frame.extend_from_slice(b"\n\n");
    frame.into()
}

/// The error that makes hyper drop the connection. hyper closes without
/// flushing what it buffered, so first yield once: a pending body makes it
/// flush the head and earlier frames, as a provider dying mid-answer would.
pub async fn abort_after_flush() -> io::Error {
    tokio::task::yield_now().await;
    io::Error::new(io::ErrorKind::ConnectionAborted, "mock: cut")
}

pub struct Playback {
    pub frames: Vec<Bytes>,
    /// Sleep before every frame but the first.
    pub delay: Duration,
    /// After the last frame, fail the body so the server drops the connection
    /// without the chunked-encoding terminator: the client sees a truncated
    /// stream, as when a provider dies mid-answer.
    pub abort: bool,
}

impl Playback {
    pub fn into_response(self) -> Response {
        let Playback { frames, delay, abort } = self;
        let state = (frames.into_iter(), delay, abort, true);
        let body = stream::unfold(state, |(mut frames, delay, abort, first)| async move {
            match frames.next() {
                Some(frame) => {
                    if !first && !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    Some((Ok(frame), (frames, delay, abort, false)))
                }
                None if abort => Some((Err(abort_after_flush().await), (frames, delay, false, false))),
                None => None,
            }
        });
        (
            [
                (header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            Body::from_stream(body),
        )
            .into_response()
    }
}
