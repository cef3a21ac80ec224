//! Frames a streamed upstream body into the WIT `event { name, data }` records
//! adapters consume. Server-sent events (most providers) go through
//! eventsource-stream; AWS event-stream bodies (`application/vnd.amazon.eventstream`,
//! Bedrock) go through aws-smithy-eventstream's frame decoder, which checks the
//! prelude and message CRCs.
//!
//! An event-stream message becomes an event named by its `:event-type` header, or
//! by its `:exception-type` header for an exception message (so the adapter can
//! classify it, e.g. `throttlingException`); the data is the payload.

use std::fmt;

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::Message;
use bytes::{Bytes, BytesMut};
use eventsource_stream::Eventsource;
use futures_util::stream::{self, BoxStream};
use futures_util::{Stream, StreamExt};

use crate::plugins::Event;

/// Why a stream could not be framed: the body broke, or a frame was malformed.
#[derive(Debug)]
pub struct FrameError(String);

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FrameError {}

const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// The events of a streamed response, framed by its content type.
pub fn events(response: reqwest::Response) -> BoxStream<'static, Result<Event, FrameError>> {
    let event_stream = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with(EVENT_STREAM));
    let body = response.bytes_stream();
    if event_stream {
        aws_events(body).boxed()
    } else {
        sse_events(body).boxed()
    }
}

fn sse_events<S, E>(body: S) -> impl Stream<Item = Result<Event, FrameError>>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    body.eventsource().map(|item| match item {
        Ok(event) => Ok(Event {
            name: (event.event != "message").then_some(event.event),
            data: event.data.into_bytes(),
        }),
        Err(e) => Err(FrameError(super::upstream::error_chain(&e))),
    })
}

/// Decodes binary event-stream messages as bytes arrive; a message may span
/// several chunks and a chunk may hold several messages.
fn aws_events<S, E>(body: S) -> impl Stream<Item = Result<Event, FrameError>>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + 'static,
{
    struct State<S> {
        body: std::pin::Pin<Box<S>>,
        buffer: BytesMut,
        decoder: MessageFrameDecoder,
        done: bool,
    }
    let state = State {
        body: Box::pin(body),
        buffer: BytesMut::new(),
        decoder: MessageFrameDecoder::new(),
        done: false,
    };
    stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        loop {
            match state.decoder.decode_frame(&mut state.buffer) {
                Ok(DecodedFrame::Complete(message)) => return Some((Ok(to_event(&message)), state)),
                Ok(DecodedFrame::Incomplete) => {}
                Err(e) => {
                    state.done = true;
                    return Some((Err(FrameError(format!("malformed event-stream frame: {e}"))), state));
                }
            }
            match state.body.next().await {
                Some(Ok(chunk)) => state.buffer.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    state.done = true;
                    return Some((Err(FrameError(super::upstream::error_chain(&e))), state));
                }
                // Bytes left over mean the stream stopped inside a frame.
                None if !state.buffer.is_empty() => {
                    state.done = true;
                    return Some((Err(FrameError("event stream ended inside a frame".into())), state));
                }
                None => return None,
            }
        }
    })
}

fn to_event(message: &Message) -> Event {
    let header = |wanted: &str| {
        message
            .headers()
            .iter()
            .find(|h| h.name().as_str() == wanted)
            .and_then(|h| h.value().as_string().ok())
            .map(|v| v.as_str().to_string())
    };
    let name = match header(":message-type").as_deref() {
        Some("exception") => header(":exception-type"),
        // An `error` message carries its code in `:error-code`.
        Some("error") => header(":error-code"),
        _ => header(":event-type"),
    };
    Event {
        name,
        data: message.payload().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use aws_smithy_eventstream::frame::write_message_to;
    use aws_smithy_types::event_stream::{Header, HeaderValue};

    use super::*;

    fn frame(kind: &str, type_header: &str, name: &str, payload: &str) -> Vec<u8> {
        let message = Message::new(payload.as_bytes().to_vec())
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String(kind.to_string().into()),
            ))
            .add_header(Header::new(
                type_header.to_string(),
                HeaderValue::String(name.to_string().into()),
            ))
            .add_header(Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ));
        let mut out = Vec::new();
        write_message_to(&message, &mut out).unwrap();
        out
    }

    async fn decode(chunks: Vec<Vec<u8>>) -> Vec<Result<Event, FrameError>> {
        let body = stream::iter(chunks.into_iter().map(|c| Ok::<_, std::io::Error>(Bytes::from(c))));
        aws_events(body).collect().await
    }

    #[tokio::test]
    async fn decodes_messages_split_and_joined_across_chunks() {
        let mut bytes = frame("event", ":event-type", "messageStart", r#"{"role":"assistant"}"#);
        bytes.extend(frame(
            "event",
            ":event-type",
            "contentBlockDelta",
            r#"{"delta":{"text":"Hi"}}"#,
        ));
        bytes.extend(frame(
            "exception",
            ":exception-type",
            "throttlingException",
            r#"{"message":"slow"}"#,
        ));
        // Three-byte chunks: every message spans chunks, some chunks span messages.
        let events = decode(bytes.chunks(3).map(<[u8]>::to_vec).collect()).await;
        let events: Vec<Event> = events.into_iter().map(Result::unwrap).collect();
        let names: Vec<_> = events.iter().map(|e| e.name.clone().unwrap()).collect();
        assert_eq!(names, ["messageStart", "contentBlockDelta", "throttlingException"]);
        assert_eq!(events[1].data, br#"{"delta":{"text":"Hi"}}"#);
    }

    #[tokio::test]
    async fn a_corrupt_frame_is_an_error() {
        let mut bytes = frame("event", ":event-type", "messageStop", "{}");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff; // breaks the message CRC
        let events = decode(vec![bytes]).await;
        assert_eq!(events.len(), 1);
        assert!(events[0].as_ref().unwrap_err().0.contains("malformed"));
    }

    #[tokio::test]
    async fn a_truncated_stream_is_an_error() {
        let bytes = frame("event", ":event-type", "messageStop", "{}");
        let events = decode(vec![bytes[..bytes.len() - 2].to_vec()]).await;
        assert_eq!(events.len(), 1);
        assert!(events[0].as_ref().unwrap_err().0.contains("inside a frame"));
    }

    #[tokio::test]
    async fn sse_is_framed_as_before() {
        let body = stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(
            b"data: {\"a\":1}\n\nevent: ping\ndata: x\n\n",
        ))]);
        let events: Vec<Event> = sse_events(body).map(Result::unwrap).collect().await;
        assert_eq!(events[0].name, None);
        assert_eq!(events[0].data, b"{\"a\":1}");
        assert_eq!(events[1].name.as_deref(), Some("ping"));
    }
}
