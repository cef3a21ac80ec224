//! Messages API SSE events → `chat.completion.chunk`s.
//!
//! | Anthropic event | chunks |
//! |---|---|
//! | `message_start` | the role chunk (`role: "assistant"`, `content: ""`) |
//! | `content_block_start` `tool_use` | a tool-call delta with `index`, `id`, `type`, `function.name`, empty `arguments` |
//! | `content_block_delta` `text_delta` | a content delta |
//! | `content_block_delta` `input_json_delta` | a tool-call delta with the `arguments` fragment |
//! | `message_delta` with `stop_reason` | an empty delta with the finish reason |
//! | `message_stop` | none; [`StreamState::finish`] then adds a `choices: []` chunk the host puts usage and cost on |
//! | `ping`, `content_block_stop`, thinking deltas | none |
//! | `error` | the classified error (e.g. `overloaded_error` mid-stream) |
//!
//! In JSON mode (a forced tool, see `request::JSON_TOOL`) the tool's
//! `input_json_delta` fragments are content deltas instead. Usage arrives in
//! two parts: `message_start` holds the input and cache counts, and
//! `message_delta` the running output count; the latest value of each wins.
//! A stream that ends without `message_stop` was cut short and is reported
//! as an upstream failure, so the gateway can fail over and continue.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::stream::{ChunkWriter, json_event, tool_call_arguments, tool_call_start};
use tollgate_plugin_sdk::{AdapterError, CallContext, Event, StreamTranslator, Usage};

use crate::request::Shape;
use crate::{error, response};

/// What a content block at an upstream index turns into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    /// A tool call, with its OpenAI `tool_calls[].index`.
    Tool(usize),
    /// The JSON-mode tool: its input is the answer's content.
    Json,
    /// Thinking and anything else without a chat-completions form.
    Skipped,
}

/// Stream position of one exchange.
pub struct StreamState {
    chunks: ChunkWriter,
    json_tool: Option<String>,
    /// Whitespace cut from the prefill, still to be cut from the answer.
    prefix: String,
    /// (upstream block index, what it is).
    blocks: Vec<(u64, Block)>,
    json_answer: bool,
    stopped: bool,
    /// The latest usage counts, merged across events.
    usage: Map<String, Value>,
}

impl StreamState {
    pub fn new(ctx: &CallContext, shape: &Shape) -> Self {
        StreamState {
            chunks: ChunkWriter::new(ctx),
            json_tool: shape.json_tool.clone(),
            prefix: shape.trimmed_prefill.clone(),
            blocks: Vec::new(),
            json_answer: false,
            stopped: false,
            usage: Map::new(),
        }
    }

    fn block_start(&mut self, data: &Value, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let kind = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                self.text(text, out)?;
                Block::Text
            }
            Some("tool_use") => {
                let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                if self.json_tool.as_deref() == Some(name) {
                    self.json_answer = true;
                    Block::Json
                } else {
                    let at = self.chunks.next_tool_index();
                    let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                    out.push(self.chunks.chunk(tool_call_start(at, id, name, ""), None)?);
                    Block::Tool(at)
                }
            }
            _ => Block::Skipped,
        };
        self.blocks.push((index, kind));
        Ok(())
    }

    fn block_delta(&mut self, data: &Value, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let kind = self
            .blocks
            .iter()
            .rev()
            .find(|(i, _)| *i == index)
            .map_or(Block::Skipped, |(_, kind)| *kind);
        let delta = data.get("delta").unwrap_or(&Value::Null);
        match (delta.get("type").and_then(Value::as_str), kind) {
            (Some("text_delta"), Block::Text) => {
                let text = delta.get("text").and_then(Value::as_str).unwrap_or("");
                self.text(text, out)?;
            }
            (Some("input_json_delta"), Block::Tool(at)) => {
                let fragment = delta.get("partial_json").and_then(Value::as_str).unwrap_or("");
                if !fragment.is_empty() {
                    out.push(self.chunks.chunk(tool_call_arguments(at, fragment), None)?);
                }
            }
            (Some("input_json_delta"), Block::Json) => {
                let fragment = delta.get("partial_json").and_then(Value::as_str).unwrap_or("");
                if !fragment.is_empty() {
                    out.push(self.chunks.chunk(json!({ "content": fragment }), None)?);
                }
            }
            // thinking_delta, signature_delta, citations_delta, …
            _ => {}
        }
        Ok(())
    }

    /// A content delta, minus what is left of the trimmed prefill whitespace.
    /// (Bedrock's stream drops only a whole leading match; this also drops
    /// the common part of a delta that starts like the whitespace and then
    /// differs.)
    fn text(&mut self, mut text: &str, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        if !self.prefix.is_empty() {
            let same = text
                .char_indices()
                .zip(self.prefix.chars())
                .take_while(|((_, a), b)| a == b)
                .last()
                .map_or(0, |((i, c), _)| i + c.len_utf8());
            if same == text.len() {
                self.prefix.drain(..same);
            } else {
                self.prefix.clear();
            }
            text = &text[same..];
        }
        if !text.is_empty() {
            out.push(self.chunks.chunk(json!({ "content": text }), None)?);
        }
        Ok(())
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        for (key, value) in usage.and_then(Value::as_object).into_iter().flatten() {
            if value.is_u64() {
                self.usage.insert(key.clone(), value.clone());
            }
        }
    }
}

impl StreamTranslator for StreamState {
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let Some(data) = json_event(&event.data, "Anthropic")? else {
            return Ok(());
        };
        if let Some(error) = error::in_body(&data) {
            return Err(error);
        }
        match data.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                if let Some(id) = message.get("id").and_then(Value::as_str) {
                    self.chunks.set_id(id);
                }
                if let Some(model) = message.get("model").and_then(Value::as_str) {
                    self.chunks.set_model(model);
                }
                self.merge_usage(message.get("usage"));
                out.push(self.chunks.chunk(json!({}), None)?);
            }
            "content_block_start" => self.block_start(&data, out)?,
            "content_block_delta" => self.block_delta(&data, out)?,
            "message_delta" => {
                self.merge_usage(data.get("usage"));
                let stop_reason = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str);
                if let Some(reason) = response::finish_reason(stop_reason, self.json_answer) {
                    out.push(self.chunks.chunk(json!({}), Some(reason))?);
                }
            }
            "message_stop" => self.stopped = true,
            // ping, content_block_stop, and event types newer than this adapter.
            _ => {}
        }
        Ok(())
    }

    /// The stream ended: the closing chunk, or an error if it was cut short.
    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.chunks
            .end(self.stopped, "Anthropic's stream ended before message_stop")
    }

    fn usage(&self) -> Option<Usage> {
        if self.usage.is_empty() {
            return None;
        }
        response::usage(&Value::Object(self.usage.clone()))
    }
}
