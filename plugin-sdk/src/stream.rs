//! Helpers for streamed responses: classifying an event's payload and
//! remembering chunk metadata to synthesize a final chunk.

use crate::AdapterError;
use crate::json::{RawObject, write_json_string};

/// What an event's `data` holds, after trimming ASCII whitespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventData<'a> {
    /// Nothing (keep-alive or blank event): skip it.
    Empty,
    /// The OpenAI end-of-stream sentinel `[DONE]`.
    Done,
    /// Anything else, to be parsed as JSON.
    Json(&'a str),
}

/// Classify an event payload. Non-UTF-8 data is an `internal` error.
pub fn event_data(data: &[u8]) -> Result<EventData<'_>, AdapterError> {
    let data = data.trim_ascii();
    if data.is_empty() {
        return Ok(EventData::Empty);
    }
    if data == b"[DONE]" {
        return Ok(EventData::Done);
    }
    std::str::from_utf8(data)
        .map(EventData::Json)
        .map_err(|_| AdapterError::internal("upstream sent a stream event that is not UTF-8"))
}

/// The identifying fields of the last `chat.completion.chunk` seen, kept as
/// raw JSON, to synthesize a final chunk when the upstream did not send one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkMeta {
    id: Option<String>,
    created: Option<String>,
    model: Option<String>,
    system_fingerprint: Option<String>,
    seen: bool,
}

impl ChunkMeta {
    /// Record the fields of `chunk` that are present and non-null. Cheap when
    /// they did not change since the previous chunk.
    pub fn remember(&mut self, chunk: &RawObject<'_>) {
        self.seen = true;
        for (key, slot) in [
            ("id", &mut self.id),
            ("created", &mut self.created),
            ("model", &mut self.model),
            ("system_fingerprint", &mut self.system_fingerprint),
        ] {
            if let Some(raw) = chunk.get_non_null(key) {
                let raw = raw.get();
                if slot.as_deref() != Some(raw) {
                    *slot = Some(raw.to_owned());
                }
            }
        }
    }

    /// Whether [`remember`](Self::remember) was called at least once.
    pub fn seen(&self) -> bool {
        self.seen
    }

    /// A final chunk with no choices:
    /// `{"id","object":"chat.completion.chunk","created","model","choices":[]}`
    /// (plus `system_fingerprint` if one was seen). Missing fields are
    /// omitted, except `id` and `model`, which default to `""`, and `created`,
    /// which defaults to `0`.
    pub fn final_chunk(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        out.extend_from_slice(b"{\"id\":");
        push_raw_or(&mut out, self.id.as_deref(), "\"\"");
        out.extend_from_slice(b",\"object\":");
        write_json_string(&mut out, "chat.completion.chunk");
        out.extend_from_slice(b",\"created\":");
        push_raw_or(&mut out, self.created.as_deref(), "0");
        out.extend_from_slice(b",\"model\":");
        push_raw_or(&mut out, self.model.as_deref(), "\"\"");
        if let Some(fp) = &self.system_fingerprint {
            out.extend_from_slice(b",\"system_fingerprint\":");
            out.extend_from_slice(fp.as_bytes());
        }
        out.extend_from_slice(b",\"choices\":[]}");
        out
    }
}

fn push_raw_or(out: &mut Vec<u8>, raw: Option<&str>, default: &str) {
    out.extend_from_slice(raw.unwrap_or(default).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn classifies_event_data() {
        assert_eq!(event_data(b"").unwrap(), EventData::Empty);
        assert_eq!(event_data(b" \r\n\t").unwrap(), EventData::Empty);
        assert_eq!(event_data(b" [DONE]\n").unwrap(), EventData::Done);
        assert_eq!(event_data(b" {\"a\":1} ").unwrap(), EventData::Json("{\"a\":1}"));
        assert!(event_data(b"\xff\xfe").is_err());
    }

    #[test]
    fn synthesizes_final_chunk() {
        let mut meta = ChunkMeta::default();
        assert!(!meta.seen());
        let final_chunk: Value = serde_json::from_slice(&meta.final_chunk()).unwrap();
        assert_eq!(
            final_chunk,
            json!({"id": "", "object": "chat.completion.chunk", "created": 0, "model": "", "choices": []})
        );

        meta.remember(
            &RawObject::parse(
                r#"{"id":"c1","created":1700000000,"model":"m","system_fingerprint":"fp","choices":[{}]}"#,
            )
            .unwrap(),
        );
        meta.remember(&RawObject::parse(r#"{"id":"c2","model":null,"choices":[]}"#).unwrap());
        assert!(meta.seen());
        let final_chunk: Value = serde_json::from_slice(&meta.final_chunk()).unwrap();
        assert_eq!(
            final_chunk,
            json!({"id": "c2", "object": "chat.completion.chunk", "created": 1700000000,
                   "model": "m", "system_fingerprint": "fp", "choices": []})
        );
    }
}
