//! Native dialects on the data plane: what the host needs to know about a
//! dialect an adapter relays natively (WIT 0.2.0), to frame its stream, add
//! the gateway's metadata where the translated path adds it, and end a
//! broken stream in the dialect's own error shape.
//!
//! One dialect exists, `anthropic-messages` (`POST /v1/messages`): its
//! closing events are `message_delta` (the final usage) and `message_stop`;
//! `message_delta` gets `provider`, `service` and `usage.cost`, as the
//! translated path's does; a failure is an `error` event.

use bytes::{BufMut, BytesMut};
use serde_json::{Map, Value, json};

use super::chunk::ChunkError;
use super::provenance::{Service, render};
use tollgate_plugin_host::Event;
use tollgate_web::error::ApiError;

/// Anthropic's Messages API, as `POST /v1/messages` takes it.
pub const ANTHROPIC_MESSAGES: &str = "anthropic-messages";

/// Longest event name the host relays.
const MAX_EVENT_NAME: usize = 64;

/// Whether `event` is the first of the closing events, which are held back
/// until the bill is settled.
pub fn closes(event: &Event) -> bool {
    matches!(event.name.as_deref(), Some("message_delta" | "message_stop"))
}

/// An adapter's event is relayed only if it frames cleanly: a short name
/// without line breaks, and JSON data.
pub fn check_event(event: &Event) -> Result<(), ChunkError> {
    if let Some(name) = &event.name
        && (name.is_empty() || name.len() > MAX_EVENT_NAME || name.bytes().any(|b| b.is_ascii_control()))
    {
        return Err(ChunkError::BadEvent("bad event name".into()));
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(&event.data)
        .map(|_| ())
        .map_err(|e| ChunkError::BadEvent(format!("event data is not JSON: {e}")))
}

/// The closing event with the gateway's metadata, if it is the one that
/// carries usage (`message_delta`); else `None` (relayed as it is).
pub fn annotate_closing(event: &Event, service: &Service) -> Option<Vec<u8>> {
    if event.name.as_deref() != Some("message_delta") {
        return None;
    }
    let mut object: Map<String, Value> = serde_json::from_slice(&event.data).ok()?;
    service.annotate_native(&mut object);
    Some(render(object, service.cost(), None))
}

/// `message_start` with `message.model` set to the id the caller asked for
/// (`<provider>/<model>`) instead of the upstream's own name, which the
/// answer keeps in `service.upstream_model`; `None` for any other event.
pub fn with_model(event: &Event, model: &str) -> Option<Vec<u8>> {
    if event.name.as_deref() != Some("message_start") {
        return None;
    }
    let mut object: Map<String, Value> = serde_json::from_slice(&event.data).ok()?;
    let message = object.get_mut("message")?.as_object_mut()?;
    message.insert("model".into(), Value::String(model.to_string()));
    serde_json::to_vec(&object).ok()
}

/// Writes one SSE frame: `event: <name>` when named, then the data (one
/// `data:` line per line of it).
pub fn write_event(frame: &mut BytesMut, name: Option<&str>, data: &[u8]) {
    if let Some(name) = name {
        frame.put_slice(b"event: ");
        frame.put_slice(name.as_bytes());
        frame.put_slice(b"\n");
    }
    for line in data.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        frame.put_slice(b"data: ");
        frame.put_slice(line);
        frame.put_slice(b"\n");
    }
    frame.put_slice(b"\n");
}

/// A failed native stream's last event: Anthropic's `error` event, with the
/// gateway's `code` and `service` (what the attempts cost), as the
/// translated path ends one.
pub fn write_error(frame: &mut BytesMut, error: &ApiError, service: Value) {
    let event = json!({
        "type": "error",
        "error": {
            "type": super::ingress::anthropic::error_type(error),
            "message": error.message,
            "code": error.code,
        },
        "service": service,
    });
    write_event(frame, Some("error"), event.to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> Event {
        Event {
            name: name.map(str::to_string),
            data: data.as_bytes().to_vec(),
        }
    }

    #[test]
    fn frames_events_and_refuses_what_would_break_the_framing() {
        let mut frame = BytesMut::new();
        write_event(&mut frame, Some("ping"), b"{\"type\":\"ping\"}");
        write_event(&mut frame, None, b"{\n\"a\":1}");
        assert_eq!(
            &frame[..],
            b"event: ping\ndata: {\"type\":\"ping\"}\n\ndata: {\ndata: \"a\":1}\n\n"
        );
        assert!(check_event(&event(Some("ping"), "{}")).is_ok());
        assert!(check_event(&event(Some("a\nb"), "{}")).is_err());
        assert!(check_event(&event(Some("ok"), "not json")).is_err());
        assert!(closes(&event(Some("message_delta"), "{}")));
        assert!(!closes(&event(Some("content_block_stop"), "{}")));
    }

    #[test]
    fn message_start_names_the_requested_model() {
        let start = event(
            Some("message_start"),
            r#"{"type":"message_start","message":{"id":"m","model":"claude-x","usage":{"input_tokens":7}}}"#,
        );
        let renamed: Value = serde_json::from_slice(&with_model(&start, "anthropic/claude-x").unwrap()).unwrap();
        assert_eq!(renamed["message"]["model"], "anthropic/claude-x");
        assert_eq!(renamed["message"]["usage"]["input_tokens"], 7);
        assert!(with_model(&event(Some("ping"), "{}"), "a/b").is_none());
    }
}
