//! Helpers for streamed responses: classifying an event's payload (and
//! reading a native protocol's JSON events, [`json_event`]), remembering
//! chunk metadata to synthesize a final chunk ([`ChunkMeta`], for upstreams
//! that already send chunks), and writing the chunks of a translated stream
//! ([`ChunkWriter`], for native protocols).

use serde_json::{Value, json};

use crate::json::{RawObject, write_json_string};
use crate::{AdapterError, CallContext};

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

/// The JSON of a native protocol's stream event; `None` for an empty
/// event or `[DONE]`. `provider` names who sent invalid JSON in the error.
pub fn json_event(data: &[u8], provider: &str) -> Result<Option<Value>, AdapterError> {
    let text = match event_data(data)? {
        EventData::Empty | EventData::Done => return Ok(None),
        EventData::Json(text) => text,
    };
    serde_json::from_str(text)
        .map(Some)
        .map_err(|_| AdapterError::internal(format!("{provider} sent an invalid JSON stream event")))
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

/// Writes the `chat.completion.chunk`s of one translated stream: one choice
/// (index 0), the completion's `id`, `model` and `created` as the upstream
/// named them, the role on the first chunk, and a count of the tool calls
/// started (their `tool_calls[].index`).
///
/// Until the upstream names them, the id is `chatcmpl-{request_id}` and the
/// model is the context's upstream model; `created` is 0 unless set (adapters
/// have no clock).
#[derive(Debug, Clone)]
pub struct ChunkWriter {
    request_id: String,
    upstream_model: String,
    id: Option<String>,
    model: Option<String>,
    created: u64,
    role_sent: bool,
    tool_calls: usize,
}

impl ChunkWriter {
    pub fn new(ctx: &CallContext) -> Self {
        ChunkWriter {
            request_id: ctx.request_id.clone(),
            upstream_model: ctx.upstream_model.clone(),
            id: None,
            model: None,
            created: 0,
            role_sent: false,
            tool_calls: 0,
        }
    }

    /// Names the completion `chatcmpl-{upstream_id}`; an empty id is ignored.
    pub fn set_id(&mut self, upstream_id: &str) {
        if !upstream_id.is_empty() {
            self.id = Some(format!("chatcmpl-{upstream_id}"));
        }
    }

    /// Whether [`set_id`](Self::set_id) named the completion.
    pub fn has_id(&self) -> bool {
        self.id.is_some()
    }

    /// The model the upstream says answered; an empty name is ignored.
    pub fn set_model(&mut self, model: &str) {
        if !model.is_empty() {
            self.model = Some(model.to_owned());
        }
    }

    /// Whether [`set_model`](Self::set_model) named the model.
    pub fn has_model(&self) -> bool {
        self.model.is_some()
    }

    /// The completion's creation time, in Unix seconds.
    pub fn set_created(&mut self, created: u64) {
        self.created = created;
    }

    pub fn created(&self) -> u64 {
        self.created
    }

    /// Whether a chunk (and so the role) was written.
    pub fn role_sent(&self) -> bool {
        self.role_sent
    }

    /// The number of tool calls started with [`next_tool_index`](Self::next_tool_index).
    pub fn tool_calls(&self) -> usize {
        self.tool_calls
    }

    /// The `tool_calls[].index` of a new tool call.
    pub fn next_tool_index(&mut self) -> usize {
        self.tool_calls += 1;
        self.tool_calls - 1
    }

    /// One chunk with one choice holding `delta`. The first chunk also names
    /// the role (`"role": "assistant"`, and `"content": ""` when `delta` has
    /// no `content`).
    pub fn chunk(&mut self, mut delta: Value, finish_reason: Option<&str>) -> Result<Vec<u8>, AdapterError> {
        if !self.role_sent {
            self.role_sent = true;
            delta["role"] = Value::from("assistant");
            if delta.get("content").is_none() {
                delta["content"] = Value::from("");
            }
        }
        self.write(json!([{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason }]))
    }

    /// A chunk with no choices, to end the stream on: the host puts usage
    /// and cost on the last chunk, as OpenAI's `include_usage` stream ends.
    pub fn final_chunk(&self) -> Result<Vec<u8>, AdapterError> {
        self.write(json!([]))
    }

    /// The chunks that end a stream whose upstream `finished` the answer:
    /// the [`final_chunk`](Self::final_chunk). A stream that ends before the
    /// answer did was cut short (a proxy that closes cleanly looks like the
    /// end of the body), an upstream failure the gateway can fail over from;
    /// `unfinished` says what was missing.
    pub fn end(&self, finished: bool, unfinished: &str) -> Result<Vec<Vec<u8>>, AdapterError> {
        if !finished {
            return Err(AdapterError::cut_short(unfinished));
        }
        Ok(vec![self.final_chunk()?])
    }

    fn write(&self, choices: Value) -> Result<Vec<u8>, AdapterError> {
        let chunk = json!({
            "id": self.id(),
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model.as_deref().unwrap_or(&self.upstream_model),
            "choices": choices,
        });
        serde_json::to_vec(&chunk).map_err(|e| AdapterError::internal(e.to_string()))
    }

    fn id(&self) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| format!("chatcmpl-{}", self.request_id))
    }
}

/// The delta that starts tool call `index`: `content: null` and the call's
/// `id`, `type`, `function.name` and first `function.arguments`.
pub fn tool_call_start(index: usize, id: &str, name: &str, arguments: &str) -> Value {
    json!({
        "content": null,
        "tool_calls": [{
            "index": index,
            "id": id,
            "type": "function",
            "function": { "name": name, "arguments": arguments },
        }],
    })
}

/// The delta that continues tool call `index` with an `arguments` fragment.
pub fn tool_call_arguments(index: usize, fragment: &str) -> Value {
    json!({ "tool_calls": [{ "index": index, "function": { "arguments": fragment } }] })
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

    fn writer() -> ChunkWriter {
        ChunkWriter::new(&CallContext {
            request_id: "req-7".into(),
            upstream_model: "up-model".into(),
            base_url: "http://x".into(),
            stream: true,
            attempt: 0,
            max_output_tokens: None,
            continuation: None,
        })
    }

    fn parse(chunk: Result<Vec<u8>, AdapterError>) -> Value {
        serde_json::from_slice(&chunk.unwrap()).unwrap()
    }

    #[test]
    fn writer_names_the_role_once_and_defaults_id_and_model() {
        let mut w = writer();
        assert!(!w.role_sent());
        assert_eq!(
            parse(w.chunk(json!({}), None)),
            json!({"id": "chatcmpl-req-7", "object": "chat.completion.chunk", "created": 0, "model": "up-model",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "logprobs": null, "finish_reason": null}]})
        );
        assert!(w.role_sent());
        let second = parse(w.chunk(json!({"content": "hi"}), Some("stop")));
        assert_eq!(second["choices"][0]["delta"], json!({"content": "hi"}));
        assert_eq!(second["choices"][0]["finish_reason"], "stop");
        assert_eq!(
            parse(w.final_chunk()),
            json!({"id": "chatcmpl-req-7", "object": "chat.completion.chunk", "created": 0, "model": "up-model",
                   "choices": []})
        );
    }

    #[test]
    fn writer_keeps_a_first_delta_s_content_and_uses_upstream_names() {
        let mut w = writer();
        w.set_id("");
        w.set_model("");
        assert!(!w.has_id() && !w.has_model());
        w.set_id("msg_1");
        w.set_model("m-2024");
        w.set_created(1_700_000_000);
        assert!(w.has_id() && w.has_model());
        assert_eq!(w.created(), 1_700_000_000);
        let first = parse(w.chunk(tool_call_start(w.tool_calls(), "call_1", "f", "{}"), None));
        assert_eq!(
            first,
            json!({"id": "chatcmpl-msg_1", "object": "chat.completion.chunk", "created": 1_700_000_000,
                   "model": "m-2024",
                   "choices": [{"index": 0, "logprobs": null, "finish_reason": null, "delta": {
                       "role": "assistant", "content": null,
                       "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                       "function": {"name": "f", "arguments": "{}"}}]}}]})
        );
        assert_eq!(parse(w.final_chunk())["model"], "m-2024");
    }

    #[test]
    fn reads_json_events_and_ends_only_finished_streams() {
        assert_eq!(json_event(b" [DONE]", "P").unwrap(), None);
        assert_eq!(json_event(b"", "P").unwrap(), None);
        assert_eq!(json_event(b"{\"a\":1}", "P").unwrap(), Some(json!({"a": 1})));
        assert_eq!(
            json_event(b"{", "P").unwrap_err().message,
            "P sent an invalid JSON stream event"
        );
        let w = writer();
        assert_eq!(w.end(true, "why").unwrap().len(), 1);
        let err = w.end(false, "why").unwrap_err();
        assert_eq!(err, AdapterError::cut_short("why"));
    }

    #[test]
    fn writer_counts_tool_calls() {
        let mut w = writer();
        assert_eq!(w.tool_calls(), 0);
        assert_eq!(w.next_tool_index(), 0);
        assert_eq!(w.next_tool_index(), 1);
        assert_eq!(w.tool_calls(), 2);
        assert_eq!(
            tool_call_arguments(1, "{\"a\""),
            json!({"tool_calls": [{"index": 1, "function": {"arguments": "{\"a\""}}]})
        );
    }
}
