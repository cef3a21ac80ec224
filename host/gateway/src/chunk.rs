//! One streamed chunk from an adapter → one SSE `data:` frame, checked.
//!
//! Adapters are untrusted, and SSE framing is line-based: a raw newline in a
//! chunk could end the event early and forge a `data: [DONE]` or a chunk of the
//! adapter's choosing. So a chunk must be exactly one JSON object, it is
//! written without raw line breaks, and the fields only the host may state
//! (`provider`, `model`, `service`, `usage.cost`) are replaced or removed:
//! `model` is the id the caller asked for (`<provider>/<model>`), not the
//! upstream's own name. It is one
//! borrowed parse; every value the adapter wrote is copied as written (a
//! reparse would round numbers), and keys are compared unescaped, so
//! `"c\u006fst"` is `cost` too. A `created` of 0 or `null` (an adapter has no
//! clock) is stamped with the host's time.

use std::borrow::Cow;
use std::fmt;

use bytes::{BufMut, BytesMut};
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

/// Fields of a chunk that only the host writes.
const HOST_FIELDS: [&str; 3] = ["provider", "model", "service"];

#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    #[error("stream chunk is not a single JSON object: {0}")]
    NotAnObject(String),
    #[error("native stream event is malformed: {0}")]
    BadEvent(String),
}

/// Writes `data: {"provider":"<id>","model":"<model id>",<the chunk's other
/// fields>}\n\n`. On an error nothing is written.
pub fn write_chunk(frame: &mut BytesMut, provider: &str, model: &str, chunk: &[u8]) -> Result<(), ChunkError> {
    write_chunk_at(frame, provider, model, unix_now(), chunk)
}

/// Writes the checked chunk object alone, `{"provider":…,"model":…,…}`,
/// without its SSE framing. On an error nothing is written.
pub fn write_object(out: &mut BytesMut, provider: &str, model: &str, chunk: &[u8]) -> Result<(), ChunkError> {
    write_object_at(out, provider, model, unix_now(), chunk)
}

/// Frames a checked chunk object as one SSE `data:` event.
pub fn frame_object(frame: &mut BytesMut, object: &[u8]) {
    frame.put_slice(b"data: ");
    frame.put_slice(object);
    frame.put_slice(b"\n\n");
}

/// Seconds since the Unix epoch: what `created` holds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// [`write_chunk`], stamping `created` (when the adapter left it 0) with `now`.
fn write_chunk_at(frame: &mut BytesMut, provider: &str, model: &str, now: u64, chunk: &[u8]) -> Result<(), ChunkError> {
    let mut object = BytesMut::new();
    write_object_at(&mut object, provider, model, now, chunk)?;
    frame_object(frame, &object);
    Ok(())
}

fn write_object_at(
    frame: &mut BytesMut,
    provider: &str,
    model: &str,
    now: u64,
    chunk: &[u8],
) -> Result<(), ChunkError> {
    let fields: Fields<'_> = serde_json::from_slice(chunk).map_err(|e| ChunkError::NotAnObject(e.to_string()))?;
    frame.put_slice(b"{\"provider\":");
    put_json_string(frame, provider);
    frame.put_slice(b",\"model\":");
    put_json_string(frame, model);
    for (key, raw) in fields.0 {
        if HOST_FIELDS.contains(&key.as_ref()) {
            continue;
        }
        frame.put_u8(b',');
        put_json_string(frame, &key);
        frame.put_u8(b':');
        // `usage` is an object the adapter fills, but for its `cost`.
        let usage = (key == "usage")
            .then(|| serde_json::from_str::<Fields<'_>>(raw.get()).ok())
            .flatten();
        if key == "created" && matches!(raw.get(), "0" | "null") {
            frame.put_slice(now.to_string().as_bytes());
            continue;
        }
        match usage {
            Some(usage) => {
                frame.put_u8(b'{');
                let kept = usage.0.into_iter().filter(|(key, _)| key != "cost");
                for (i, (key, raw)) in kept.enumerate() {
                    if i > 0 {
                        frame.put_u8(b',');
                    }
                    put_json_string(frame, &key);
                    frame.put_u8(b':');
                    put_raw(frame, raw);
                }
                frame.put_u8(b'}');
            }
            None => put_raw(frame, raw),
        }
    }
    frame.put_u8(b'}');
    Ok(())
}

/// A raw JSON value, on one line. A valid JSON text holds a raw CR or LF only
/// as whitespace between tokens (a string must escape them), where a space
/// means the same.
fn put_raw(frame: &mut BytesMut, raw: &RawValue) {
    let bytes = raw.get().as_bytes();
    if !bytes.iter().any(|b| matches!(b, b'\n' | b'\r')) {
        frame.put_slice(bytes);
        return;
    }
    frame.extend(bytes.iter().map(|&b| if matches!(b, b'\n' | b'\r') { b' ' } else { b }));
}

fn put_json_string(frame: &mut BytesMut, text: &str) {
    frame.put_slice(&serde_json::to_vec(text).expect("strings always serialise"));
}

/// A JSON object's top-level fields, in order, values left raw.
struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    fields.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Splits written frames the way an SSE client does: events end at a blank
    /// line, and each `data:` line is one payload.
    fn sse_payloads(frame: &BytesMut) -> Vec<String> {
        let text = std::str::from_utf8(frame).unwrap();
        text.split("\n\n")
            .filter(|event| !event.is_empty())
            .flat_map(|event| {
                event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .map(str::to_string)
            })
            .collect()
    }

    fn written(chunk: &[u8]) -> Result<Vec<Value>, ChunkError> {
        let mut frame = BytesMut::new();
        write_chunk(&mut frame, "acme", "acme/m", chunk)?;
        Ok(sse_payloads(&frame)
            .iter()
            .map(|p| serde_json::from_str(p).unwrap_or_else(|e| panic!("{p}: {e}")))
            .collect())
    }

    #[test]
    fn splices_the_provider_and_keeps_the_rest() {
        let out = written(br#"{"id":"x","choices":[{"delta":{"content":"a\nb"}}]}"#).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["provider"], "acme");
        assert_eq!(out[0]["choices"][0]["delta"]["content"], "a\nb");
        assert_eq!(
            written(b"{}").unwrap()[0],
            serde_json::json!({"provider": "acme", "model": "acme/m"})
        );
        assert_eq!(written(br#"{"k\u0022":1}"#).unwrap()[0]["k\""], 1);
    }

    #[test]
    fn host_fields_are_the_hosts() {
        let forged = br#"{"provider":"evil","model":"upstream-name","service":{"cost_usd":"0"},"usage":{"prompt_tokens":1,"cost":0},"choices":[]}"#;
        let out = &written(forged).unwrap()[0];
        assert_eq!(out["provider"], "acme");
        assert_eq!(
            out["model"], "acme/m",
            "the id the caller asked for, not the upstream's name"
        );
        assert!(out.get("service").is_none());
        assert_eq!(out["usage"], serde_json::json!({"prompt_tokens": 1}));
        let spaced = b"{\"usage\":\n{\"cost\":\r\n9},\n\"provider\":\"evil\"}";
        let out = &written(spaced).unwrap()[0];
        assert_eq!(out["provider"], "acme");
        assert_eq!(out["usage"], serde_json::json!({}));
    }

    /// Found by `fuzz/stream_chunk`: a chunk with a line break took a reparse
    /// through `serde_json::Value`, which turned this integer into an f64 and
    /// wrote other digits. (The provider id is the fuzz input's, quoting and all.)
    #[test]
    fn numbers_are_copied_as_written() {
        let provider = String::from_utf8_lossy(b"\xff\"\0\0\0\0\0\0\0\0\x08\xfce\"\r");
        let mut frame = BytesMut::new();
        write_chunk(&mut frame, &provider, "m", b"\n{\"*cost-1\":984467440737095516161}").unwrap();
        let text = std::str::from_utf8(&frame).unwrap();
        assert!(text.ends_with(",\"*cost-1\":984467440737095516161}\n\n"), "{text:?}");
        assert_eq!(text.matches('\n').count(), 2);
        let payload: Value = serde_json::from_str(&sse_payloads(&frame)[0]).unwrap();
        assert_eq!(payload["provider"], *provider);
        let nested = br#"{"usage":{"prompt_tokens":1,"x":0.30000000000000004,"cost":1},"n":[1e400,
12345678901234567890123]}"#;
        let mut frame = BytesMut::new();
        write_chunk(&mut frame, "acme", "acme/m", nested).unwrap();
        assert_eq!(
            std::str::from_utf8(&frame).unwrap(),
            "data: {\"provider\":\"acme\",\"model\":\"acme/m\",\"usage\":{\"prompt_tokens\":1,\"x\":0.30000000000000004},\"n\":[1e400, 12345678901234567890123]}\n\n"
        );
    }

    /// Keys are compared unescaped: an escaped `cost` (or `provider`, `service`)
    /// is still the host's.
    #[test]
    fn escaped_host_fields_are_removed_too() {
        let forged = br#"{"pr\u006fvider":"evil","s\u0065rvice":{},"usage":{"c\u006fst":0,"total_tokens":2}}"#;
        assert_eq!(
            written(forged).unwrap(),
            [serde_json::json!({"provider": "acme", "model": "acme/m", "usage": {"total_tokens": 2}})]
        );
        let mut frame = BytesMut::from(&b"kept"[..]);
        assert!(write_chunk(&mut frame, "acme", "acme/m", b"{\"a\":1").is_err());
        assert_eq!(&frame[..], b"kept", "a refused chunk writes nothing");
    }

    #[test]
    fn an_unset_created_is_stamped() {
        let mut frame = BytesMut::new();
        write_chunk_at(
            &mut frame,
            "acme",
            "a/m",
            1_700_000_000,
            br#"{"created":0,"a":{"created":0}}"#,
        )
        .unwrap();
        write_chunk_at(&mut frame, "acme", "a/m", 1_700_000_000, br#"{"created":12}"#).unwrap();
        assert_eq!(
            std::str::from_utf8(&frame).unwrap(),
            "data: {\"provider\":\"acme\",\"model\":\"a/m\",\"created\":1700000000,\"a\":{\"created\":0}}\n\ndata: {\"provider\":\"acme\",\"model\":\"a/m\",\"created\":12}\n\n"
        );
    }

    #[test]
    fn a_chunk_cannot_forge_frames() {
        for hostile in [
            &b"{\"choices\":[]}\n\ndata: [DONE]\n\n"[..],
            b"{\"a\":1}\n\ndata: {\"usage\":{\"cost\":0}}",
            b"{\"a\":1}{\"b\":2}",
            b"[DONE]",
            b"\"text\"",
            b"",
        ] {
            assert!(written(hostile).is_err(), "{}", String::from_utf8_lossy(hostile));
        }
        // Line breaks between tokens are legal JSON: written compactly, one frame.
        let mut frame = BytesMut::new();
        write_chunk(&mut frame, "acme", "acme/m", b"{\"a\":\n\n[1,\n2]}").unwrap();
        let text = std::str::from_utf8(&frame).unwrap();
        assert!(text.ends_with("\n\n") && text.matches('\n').count() == 2, "{text:?}");
        assert_eq!(
            written(b"{\"a\":\n\n[1,\n2]}").unwrap(),
            [serde_json::json!({"provider": "acme", "model": "acme/m", "a": [1, 2]})]
        );
    }
}
