//! ConverseStream events → OpenAI `chat.completion.chunk`s.
//!
//! The host decodes the AWS event-stream frames; each event arrives named by
//! its `:event-type` (or `:exception-type`) with the JSON payload as data:
//! `messageStart`, then per content block an optional `contentBlockStart`
//! (tool use), `contentBlockDelta`s and a `contentBlockStop`, then
//! `messageStop` (the stop reason) and `metadata` (usage). The chunk carrying
//! `finish_reason` is held back until the stream ends, so it is the last chunk
//! and the host adds usage and cost to it.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tollgate_plugin_sdk::stream::{ChunkWriter, tool_call_arguments};
use tollgate_plugin_sdk::{AdapterError, CallContext, Event, StreamTranslator, Usage};

use crate::error;
use crate::request::Shape;
use crate::response::{finish_reason, usage_from};

/// What a content block of the answer is, by `contentBlockIndex`.
enum Block {
    /// A caller's tool call, with its OpenAI `tool_calls[].index`.
    ToolCall(usize),
    /// The response tool: its input deltas are the content.
    Response,
}

/// Stream position of one exchange. Converse streams name no id, model or
/// time: the writer's defaults (`chatcmpl-{request_id}`, the upstream model,
/// `created: 0`) are the chunks' (as in a whole answer).
pub struct StreamState {
    chunks: ChunkWriter,
    response_tool: Option<String>,
    /// Whitespace still to drop from the start of the text (continuation).
    pending_whitespace: String,
    /// A `BTreeMap`: `HashMap`'s random seed needs a WASI import, which traps.
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    usage: Option<Usage>,
}

impl StreamState {
    pub fn new(ctx: &CallContext, shape: &Shape) -> Self {
        StreamState {
            chunks: ChunkWriter::new(ctx),
            response_tool: shape.response_tool.clone(),
            pending_whitespace: shape.prefill_whitespace.clone(),
            blocks: BTreeMap::new(),
            stop_reason: None,
            usage: None,
        }
    }

    /// The role goes in a chunk of its own, before any other.
    fn ensure_role(&mut self, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        if !self.chunks.role_sent() {
            out.push(self.chunks.chunk(json!({}), None)?);
        }
        Ok(())
    }

    fn block_start(&mut self, data: &Value, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let Some(tool_use) = data.pointer("/start/toolUse") else {
            return Ok(());
        };
        let index = block_index(data)?;
        let name = tool_use.get("name").and_then(Value::as_str).unwrap_or_default();
        self.ensure_role(out)?;
        if self.response_tool.as_deref() == Some(name) {
            self.blocks.insert(index, Block::Response);
            return Ok(());
        }
        let id = tool_use
            .get("toolUseId")
            .and_then(Value::as_str)
            .ok_or_else(|| AdapterError::internal("Bedrock started a toolUse block without toolUseId"))?;
        let tool_index = self.chunks.next_tool_index();
        self.blocks.insert(index, Block::ToolCall(tool_index));
        // Unlike `stream::tool_call_start`, no `content: null`: the role
        // chunk came first.
        let call = json!({
            "index": tool_index, "id": id, "type": "function",
            "function": { "name": name, "arguments": "" }
        });
        out.push(self.chunks.chunk(json!({ "tool_calls": [call] }), None)?);
        Ok(())
    }

    fn block_delta(&mut self, data: &Value, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let Some(delta) = data.get("delta") else {
            return Ok(());
        };
        if let Some(text) = delta.get("text").and_then(Value::as_str) {
            return self.text(text, out);
        }
        let Some(input) = delta.pointer("/toolUse/input").and_then(Value::as_str) else {
            // reasoningContent, citations, …: no OpenAI form.
            return Ok(());
        };
        match self.blocks.get(&block_index(data)?) {
            Some(Block::Response) => self.text(input, out),
            Some(Block::ToolCall(tool_index)) => {
                let delta = tool_call_arguments(*tool_index, input);
                out.push(self.chunks.chunk(delta, None)?);
                Ok(())
            }
            None => Err(AdapterError::internal(
                "Bedrock sent toolUse input for a block it did not start",
            )),
        }
    }

    /// A content delta, minus the continuation's whitespace when the delta
    /// starts with it (or is a part of it).
    fn text(&mut self, text: &str, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        self.ensure_role(out)?;
        let mut text = text;
        if !self.pending_whitespace.is_empty() {
            if let Some(rest) = text.strip_prefix(self.pending_whitespace.as_str()) {
                text = rest;
                self.pending_whitespace.clear();
            } else if let Some(rest) = self.pending_whitespace.strip_prefix(text) {
                // The delta is all whitespace the caller already has.
                self.pending_whitespace = rest.to_owned();
                text = "";
            } else {
                self.pending_whitespace.clear();
            }
        }
        if !text.is_empty() {
            out.push(self.chunks.chunk(json!({ "content": text }), None)?);
        }
        Ok(())
    }
}

impl StreamTranslator for StreamState {
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let Some(name) = event.name.as_deref() else {
            if event.data.trim_ascii().is_empty() {
                return Ok(());
            }
            return Err(AdapterError::internal(
                "Bedrock's stream is not an AWS event stream (an event has no type)",
            ));
        };
        if error::is_exception(name) {
            return Err(error::classify_exception(name, &event.data));
        }
        let data: Value = serde_json::from_slice(&event.data)
            .map_err(|_| AdapterError::internal(format!("Bedrock sent a '{name}' event that is not JSON")))?;
        match name {
            "messageStart" => self.ensure_role(out)?,
            "contentBlockStart" => self.block_start(&data, out)?,
            "contentBlockDelta" => self.block_delta(&data, out)?,
            "messageStop" => {
                let reason = data.get("stopReason").and_then(Value::as_str).unwrap_or("end_turn");
                self.stop_reason = Some(reason.to_owned());
            }
            "metadata" => {
                if let Some(usage) = data.get("usage").and_then(usage_from) {
                    self.usage = Some(usage);
                }
            }
            // contentBlockStop, and event types added after this adapter.
            _ => {}
        }
        Ok(())
    }

    /// The held-back `finish_reason` chunk. A stream that ends without
    /// `messageStop` was cut short: an upstream failure, so the host can fail
    /// over or continue on another candidate.
    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        let Some(reason) = self.stop_reason.take() else {
            return Err(AdapterError::cut_short("Bedrock's stream ended before messageStop"));
        };
        let mut out = Vec::with_capacity(2);
        self.ensure_role(&mut out)?;
        let called_tools = self.blocks.values().any(|b| matches!(b, Block::ToolCall(_)));
        let finish = finish_reason(&reason, called_tools);
        out.push(self.chunks.chunk(json!({}), Some(finish))?);
        Ok(out)
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
    }
}

fn block_index(data: &Value) -> Result<u64, AdapterError> {
    data.get("contentBlockIndex")
        .and_then(Value::as_u64)
        .ok_or_else(|| AdapterError::internal("Bedrock sent a content block event without contentBlockIndex"))
}
