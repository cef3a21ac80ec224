//! v2 chat SSE events → `chat.completion.chunk`s.
//!
//! Each event's JSON carries its `type` (also the SSE `event:` name):
//! - `message-start` (the answer id) → a chunk with `role: "assistant"`;
//! - `content-start` / `content-delta` text → content deltas (reasoning
//!   `thinking` deltas are not translated);
//! - `tool-plan-delta` → content deltas, as in `response`;
//! - `tool-call-start` (id, name, first arguments) → a tool-call delta with
//!   `index`, `id`, `type`, `function.name`; each `tool-call-delta` → an
//!   `arguments` fragment for the same index;
//! - `message-end` → a chunk with the finish reason; its `usage` is the
//!   exchange's usage, and a `delta.error` (finish reason `ERROR`) fails the
//!   stream with that error;
//! - `content-end`, `tool-call-end`, `citation-*`, `debug` carry nothing to
//!   translate.
//!
//! [`StreamState::finish`] then adds a `choices: []` chunk the host puts usage
//! and cost on. A stream that ends before `message-end` was cut short, and is
//! an upstream failure (so the gateway can fail over and continue the answer).

use serde_json::{Value, json};
use tollgate_plugin_sdk::stream::{ChunkWriter, json_event, tool_call_arguments, tool_call_start};
use tollgate_plugin_sdk::{AdapterError, CallContext, Event, StreamTranslator, Usage};

use crate::{error, response};

/// Stream position of one exchange. The id is fixed by `message-start`;
/// Cohere streams carry no model or timestamp (`created` is 0). Tool calls
/// started so far are counted by the writer; the last one receives argument
/// deltas.
pub struct StreamState {
    chunks: ChunkWriter,
    finished: bool,
    usage: Option<Usage>,
}

impl StreamState {
    pub fn new(ctx: &CallContext) -> Self {
        StreamState {
            chunks: ChunkWriter::new(ctx),
            finished: false,
            usage: None,
        }
    }

    /// `message-end`: usage, then the finish chunk or the reported error.
    fn end(&mut self, delta: &Value, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        if let Some(usage) = delta.get("usage").and_then(response::usage) {
            self.usage = Some(usage);
        }
        if let Some(message) = delta.get("error").and_then(Value::as_str).filter(|m| !m.is_empty()) {
            return Err(error::reported(message));
        }
        let called_tools = self.chunks.tool_calls() > 0;
        let reason = response::finish_reason(delta.get("finish_reason").and_then(Value::as_str), called_tools)?;
        self.finished = true;
        out.push(self.chunks.chunk(json!({}), Some(reason))?);
        Ok(())
    }
}

impl StreamTranslator for StreamState {
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let Some(data) = json_event(&event.data, "Cohere")? else {
            return Ok(());
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.name.as_deref())
            .unwrap_or("");
        let message = data.get("delta").and_then(|d| d.get("message"));
        let delta = match kind {
            "message-start" => {
                if let Some(id) = data.get("id").and_then(Value::as_str) {
                    self.chunks.set_id(id);
                }
                json!({})
            }
            "content-start" | "content-delta" => {
                let text = message
                    .and_then(|m| m.get("content"))
                    .and_then(|c| c.get("text"))
                    .and_then(Value::as_str);
                match text {
                    Some(text) if !text.is_empty() => json!({ "content": text }),
                    _ => return Ok(()),
                }
            }
            "tool-plan-delta" => match message.and_then(|m| m.get("tool_plan")).and_then(Value::as_str) {
                Some(plan) if !plan.is_empty() => json!({ "content": plan }),
                _ => return Ok(()),
            },
            "tool-call-start" => {
                let call = message.and_then(|m| m.get("tool_calls")).unwrap_or(&Value::Null);
                let id = call.get("id").and_then(Value::as_str);
                let function = call.get("function");
                let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(AdapterError::internal("Cohere started a tool call without id or name"));
                };
                let arguments = function
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                tool_call_start(self.chunks.next_tool_index(), id, name, arguments)
            }
            "tool-call-delta" => {
                let fragment = message
                    .and_then(|m| m.get("tool_calls"))
                    .and_then(|c| c.get("function"))
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if fragment.is_empty() {
                    return Ok(());
                }
                let Some(index) = self.chunks.tool_calls().checked_sub(1) else {
                    return Err(AdapterError::internal(
                        "Cohere sent tool-call-delta before tool-call-start",
                    ));
                };
                tool_call_arguments(index, fragment)
            }
            "message-end" => return self.end(data.get("delta").unwrap_or(&Value::Null), out),
            // An error object in place of an event.
            "" => match data.get("message").and_then(Value::as_str) {
                Some(message) => return Err(error::reported(message)),
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        out.push(self.chunks.chunk(delta, None)?);
        Ok(())
    }

    /// The stream ended: the closing chunk, or an error if it was cut short.
    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.chunks
            .end(self.finished, "Cohere's stream ended before message-end")
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
    }
}
