//! SSE framing of a streamed body (`frame_chunks` with `Framing::Sse`): it never
//! panics, any split of the body into chunks gives the same events as the
//! whole body, and the events are the ones the WHATWG event-stream rules give
//! (checked against the small reference parser below).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tollgate_gateway::fuzzing::{Event, Framing, frame_chunks};
use tollgate_fuzz::chunked;

/// An event as (name, data), or `None` for the error that ends a stream.
type Outcome = Vec<Option<(Option<String>, Vec<u8>)>>;

fn frame(chunks: Vec<Bytes>) -> Outcome {
    frame_chunks(Framing::Sse, chunks)
        .into_iter()
        .map(|item| item.ok().map(|Event { name, data }| (name, data)))
        .collect()
}

/// The event-stream rules, on the whole body at once: one leading BOM is
/// dropped; lines end at CRLF, CR or LF; a blank line dispatches the event if
/// it has data; `data` lines join with LF; `event` names it ("message" or empty
/// means unnamed); comments and other fields are ignored; a line that does not
/// end before the body does is dropped, as is an event with no blank line
/// after it. A complete line that is not UTF-8 ends the stream with an error.
fn reference(body: &[u8]) -> Outcome {
    let mut rest = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let mut out = Vec::new();
    let mut data = String::new();
    let mut name = String::new();
    while let Some(end) = rest.iter().position(|b| matches!(b, b'\r' | b'\n')) {
        let line = &rest[..end];
        let after = if rest[end..].starts_with(b"\r\n") {
            end + 2
        } else {
            end + 1
        };
        rest = &rest[after..];
        let Ok(line) = std::str::from_utf8(line) else {
            out.push(None);
            return out;
        };
        if line.is_empty() {
            if !data.is_empty() {
                data.pop();
                let name = std::mem::take(&mut name);
                let name = (!name.is_empty() && name != "message").then_some(name);
                out.push(Some((name, std::mem::take(&mut data).into_bytes())));
            }
            data.clear();
            name.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            "event" => name = value.to_string(),
            _ => {}
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let (body, chunks) = chunked(data);
    let whole = frame(vec![Bytes::copy_from_slice(body)]);
    assert_eq!(whole, reference(body), "differs from the event-stream rules");
    let split = frame(chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect());
    assert_eq!(whole, split, "a different split gave different events");
    let bytewise = frame(body.chunks(1).map(Bytes::copy_from_slice).collect());
    assert_eq!(whole, bytewise, "byte-at-a-time chunks gave different events");
});
