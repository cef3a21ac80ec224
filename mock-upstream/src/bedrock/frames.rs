//! ConverseStream's wire form: binary AWS event-stream messages (prelude,
//! headers, JSON payload, CRCs), encoded with `aws-smithy-eventstream`, the
//! codec the AWS SDKs use, and played with the shared pacing and cut logic.

use std::time::Duration;

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use axum::body::Bytes;
use axum::http::{self, header};
use axum::response::Response;
use serde_json::Value;

use crate::sse::Playback;

const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// An `event` message: `:event-type` names it, the payload is JSON.
pub fn event_frame(event_type: &str, payload: &Value) -> Bytes {
    encode("event", ":event-type", event_type, payload.to_string())
}

/// An `exception` message, as Bedrock sends for an error after the stream
/// began: `:exception-type` (`throttlingException`, …) and `{"message": …}`.
pub fn exception_frame(exception_type: &str, message: &str) -> Bytes {
    let payload = serde_json::json!({ "message": message }).to_string();
    encode("exception", ":exception-type", exception_type, payload)
}

fn encode(message_type: &str, type_header: &str, name: &str, payload: String) -> Bytes {
    let string = |s: &str| HeaderValue::String(s.to_owned().into());
    let message = Message::new(payload.into_bytes())
        .add_header(Header::new(type_header.to_owned(), string(name)))
        .add_header(Header::new(":content-type", string("application/json")))
        .add_header(Header::new(":message-type", string(message_type)));
    let mut out = Vec::new();
    // Only fails for headers or payloads beyond the format's size limits.
    if let Err(error) = write_message_to(&message, &mut out) {
        tracing::error!(%error, "mock: cannot encode an event-stream message");
    }
    Bytes::from(out)
}

/// Plays `frames` as a ConverseStream response body.
pub fn respond(frames: Vec<Bytes>, delay: Duration, abort: bool, request_id: &str) -> Response {
    let mut response = Playback { frames, delay, abort }.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, http::HeaderValue::from_static(EVENT_STREAM));
    headers.remove(header::CACHE_CONTROL);
    if let Ok(value) = http::HeaderValue::from_str(request_id) {
        headers.insert("x-amzn-requestid", value);
    }
    response
}
