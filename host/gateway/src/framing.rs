//! Frames a streamed upstream body into the WIT `event { name, data }` records
//! adapters consume. Server-sent events (most providers) are cut here, by the
//! standard's line rules (`SseParser`; the fuzz target `fuzz/sse_framing`
//! checks it against them); AWS event-stream bodies
//! (`application/vnd.amazon.eventstream`, Bedrock) go through
//! aws-smithy-eventstream's frame decoder, which checks the prelude and
//! message CRCs.
//!
//! An event-stream message becomes an event named by its `:event-type` header, or
//! by its `:exception-type` header for an exception message (so the adapter can
//! classify it, e.g. `throttlingException`); the data is the payload.

use std::collections::VecDeque;
use std::fmt;

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::Message;
use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, BoxStream};
use futures_util::{Stream, StreamExt};

use tollgate_plugin_host::Event;

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

/// How a streamed body is cut into events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events: `text/event-stream`, and anything not named otherwise.
    Sse,
    /// AWS event-stream binary messages.
    AwsEventStream,
}

impl Framing {
    fn of(content_type: Option<&str>) -> Self {
        match content_type {
            Some(v) if v.trim().to_ascii_lowercase().starts_with(EVENT_STREAM) => Framing::AwsEventStream,
            _ => Framing::Sse,
        }
    }

    fn frame<S, E>(self, body: S) -> BoxStream<'static, Result<Event, FrameError>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        match self {
            Framing::Sse => sse_events(body).boxed(),
            Framing::AwsEventStream => aws_events(body).boxed(),
        }
    }
}

/// The events of a streamed response, framed by its content type.
pub fn events(response: reqwest::Response) -> BoxStream<'static, Result<Event, FrameError>> {
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let framing = Framing::of(content_type);
    // Errors name no URL: a query-slot key would be in it.
    let body = response
        .bytes_stream()
        .map(|chunk| chunk.map_err(reqwest::Error::without_url));
    framing.frame(body)
}

/// Frames a body that is already in memory, arriving as `chunks`, with the same
/// framers as [`events`], to its end (the first error ends it too). For the
/// tests and the fuzz targets, which check that any split of a body into
/// chunks gives the same events.
pub fn frame_chunks(framing: Framing, chunks: Vec<Bytes>) -> Vec<Result<Event, FrameError>> {
    let body = stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
    let mut events = framing.frame(body);
    // An in-memory body never waits, so a no-op waker is all polling needs.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    loop {
        match events.poll_next_unpin(&mut cx) {
            std::task::Poll::Ready(Some(item)) => {
                let failed = item.is_err();
                out.push(item);
                if failed {
                    return out;
                }
            }
            std::task::Poll::Ready(None) => return out,
            std::task::Poll::Pending => unreachable!("an in-memory body is never pending"),
        }
    }
}

/// Frames server-sent events as bytes arrive; a line or event may span chunks
/// and a chunk may hold many. The body ends any unfinished event unsent.
/// Also the tools concern's reader of a remote MCP server's event stream.
pub fn sse_events<S, E>(body: S) -> impl Stream<Item = Result<Event, FrameError>>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + 'static,
{
    struct State<S> {
        body: std::pin::Pin<Box<S>>,
        parser: SseParser,
        ready: VecDeque<Result<Event, FrameError>>,
        done: bool,
    }
    let state = State {
        body: Box::pin(body),
        parser: SseParser::default(),
        ready: VecDeque::new(),
        done: false,
    };
    stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.ready.pop_front() {
                return Some((item, state));
            }
            if state.done {
                return None;
            }
            match state.body.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = state.parser.feed(&chunk, &mut state.ready) {
                        state.ready.push_back(Err(e));
                        state.done = true;
                    }
                }
                Some(Err(e)) => {
                    state.ready.push_back(Err(FrameError(super::upstream::error_chain(&e))));
                    state.done = true;
                }
                None => state.done = true,
            }
        }
    })
}

/// The longest line, and the most data one event may gather: far above any
/// provider's chunk, and a bound on what a broken upstream can make us buffer.
const MAX_EVENT_BYTES: usize = 16 << 20;

/// The event-stream rules (WHATWG HTML, "Parsing an event stream"): one
/// leading byte-order mark is dropped; a line ends at CRLF, CR or LF; a blank
/// line dispatches the event if it has data; `data` lines join with LF;
/// `event` names it; comments and other fields are ignored. A line must be
/// UTF-8 (the standard would replace bad bytes; an upstream that sends them is
/// broken, so the attempt fails instead).
#[derive(Default)]
struct SseParser {
    /// The current line's bytes so far.
    line: Vec<u8>,
    /// The last chunk ended with CR, so an LF first in the next one ends no line.
    after_cr: bool,
    /// A line has ended, so a byte-order mark is data now.
    started: bool,
    data: String,
    name: String,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    fn feed(&mut self, mut bytes: &[u8], out: &mut VecDeque<Result<Event, FrameError>>) -> Result<(), FrameError> {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            bytes = bytes.strip_prefix(b"\n").unwrap_or(bytes);
        }
        while let Some(end) = bytes.iter().position(|b| matches!(b, b'\r' | b'\n')) {
            self.push(&bytes[..end])?;
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.end_line(out)?;
        }
        self.push(bytes)
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        if self.line.len() + bytes.len() > MAX_EVENT_BYTES {
            return Err(FrameError(format!(
                "event-stream line longer than {MAX_EVENT_BYTES} bytes"
            )));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut VecDeque<Result<Event, FrameError>>) -> Result<(), FrameError> {
        let skip = if !self.started && self.line.starts_with(BOM) {
            BOM.len()
        } else {
            0
        };
        self.started = true;
        let line = std::str::from_utf8(&self.line[skip..])
            .map_err(|e| FrameError(format!("event-stream line is not UTF-8: {e}")))?;
        if line.is_empty() {
            if !self.data.is_empty() {
                self.data.pop(); // the LF after the last data line
                let name = std::mem::take(&mut self.name);
                out.push_back(Ok(Event {
                    name: (!name.is_empty() && name != "message").then_some(name),
                    data: std::mem::take(&mut self.data).into_bytes(),
                }));
            }
            self.name.clear();
        } else if !line.starts_with(':') {
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "data" => {
                    if self.data.len() + value.len() >= MAX_EVENT_BYTES {
                        return Err(FrameError(format!(
                            "event-stream event longer than {MAX_EVENT_BYTES} bytes"
                        )));
                    }
                    self.data.push_str(value);
                    self.data.push('\n');
                }
                "event" => self.name = value.to_string(),
                // `id` and `retry` steer reconnection, which a relayed answer never does.
                _ => {}
            }
        }
        self.line.clear();
        Ok(())
    }
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
            // Complete frames leave the buffer as soon as they are whole, so
            // what it holds past the cap is one frame too large to accept
            // (its CRCs are only checked once it is whole): stop buffering.
            if state.buffer.len() > MAX_EVENT_BYTES {
                state.done = true;
                let message = format!("an event-stream frame is larger than the {MAX_EVENT_BYTES}-byte limit");
                return Some((Err(FrameError(message)), state));
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
    async fn a_frame_larger_than_the_cap_fails_before_more_is_buffered() {
        // A prelude declaring 4 GiB, then 1 MiB chunks that never complete it.
        let mut chunks = vec![vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]];
        chunks.extend((0..40).map(|_| vec![0u8; 1 << 20]));
        let events = decode(chunks).await;
        assert_eq!(events.len(), 1);
        let error = events[0].as_ref().unwrap_err().0.clone();
        assert!(error.contains("larger than the 16777216-byte limit"), "{error}");
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

    fn sse(chunks: &[&[u8]]) -> Vec<Result<(Option<String>, String), String>> {
        let chunks = chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect();
        frame_chunks(Framing::Sse, chunks)
            .into_iter()
            .map(|item| {
                item.map(|e| (e.name, String::from_utf8(e.data).unwrap()))
                    .map_err(|e| e.0)
            })
            .collect()
    }

    fn event(name: Option<&str>, data: &str) -> Result<(Option<String>, String), String> {
        Ok((name.map(str::to_string), data.to_string()))
    }

    /// Found by `fuzz/sse_framing`: with CR line ends, eventsource-stream held
    /// each blank line back for an LF that never came, so the last event of a
    /// stream was lost (and every other one late).
    #[test]
    fn cr_line_ends_dispatch_at_once() {
        let body: &[u8] = b"event: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\nevent: content_block_delta\rdata: {\"delta\":{\"text\":\"Hi\"}}\r\r";
        let expected = [
            event(Some("message_start"), r#"{"type":"message_start"}"#),
            event(Some("content_block_delta"), r#"{"delta":{"text":"Hi"}}"#),
        ];
        assert_eq!(sse(&[&body[..5], &body[5..32], &body[32..]]), expected);
        assert_eq!(sse(&[body]), expected);
        assert_eq!(
            sse(&[b"data: a\r", b"\r"]),
            [event(None, "a")],
            "the blank line came in its own chunk"
        );
    }

    /// A body that opens with a byte-order mark made eventsource-stream slice
    /// inside it and panic. One mark is dropped; a second one is data.
    #[test]
    fn a_leading_byte_order_mark_is_dropped_once() {
        assert_eq!(sse(&[b"\xEF\xBB\xBFdata: x\n\n"]), [event(None, "x")]);
        assert_eq!(sse(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]), [event(None, "x")]);
        // The second mark starts the field name, so the line is no `data` line.
        assert_eq!(
            sse(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n"]),
            [event(None, "y")]
        );
    }

    #[test]
    fn lines_and_characters_may_split_anywhere() {
        let body = "data: h\u{e9}llo\r\ndata: w\u{f6}rld\r\n\r\nevent: message\ndata:\n\n: note\nid: 1\nevent: done\ndata:  x\n\n";
        let expected = [
            event(None, "h\u{e9}llo\nw\u{f6}rld"),
            event(None, ""),
            event(Some("done"), " x"),
        ];
        assert_eq!(sse(&[body.as_bytes()]), expected);
        let bytes: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
        assert_eq!(sse(&bytes), expected);
        // An event without its blank line, or a line without its end, is dropped.
        assert_eq!(sse(&[b"data: a\n\ndata: b\n"]), [event(None, "a")]);
        assert_eq!(sse(&[b"data: a\n\ndata: b"]), [event(None, "a")]);
    }

    #[test]
    fn a_line_that_is_not_utf8_ends_the_stream() {
        let out = sse(&[b"data: a\n\ndata: \xff\n\ndata: c\n\n"]);
        assert_eq!(out[0], event(None, "a"));
        assert!(out[1].as_ref().unwrap_err().contains("not UTF-8"), "{out:?}");
        assert_eq!(out.len(), 2);
    }
}
