//! A Responses API stream → `chat.completion.chunk`s.
//!
//! Every SSE event's data is an object whose `type` names it:
//! - `response.created`: the id, model and creation time of the chunks;
//! - `response.output_text.delta` (and `response.refusal.delta`): a content
//!   delta;
//! - `response.output_item.added` for a `function_call`: a tool-call delta
//!   with its `call_id`, name and any arguments so far; then
//!   `response.function_call_arguments.delta`: argument fragments of the
//!   call whose `item_id` it names;
//! - `response.completed` / `response.incomplete`: the usage, and a chunk
//!   with the finish reason; [`StreamState::finish`] then adds the
//!   `choices: []` chunk the host puts usage and cost on;
//! - `response.failed` and `error`: the upstream's error.
//!
//! Other events (reasoning summaries, `.done` repeats of what the deltas
//! said, content-part bookkeeping) carry nothing a chat answer has. A stream
//! that ends before `response.completed` or `response.incomplete` was cut
//! short, and is reported as an upstream failure the gateway can fail over
//! from.

use serde_json::{Value, json};
use tollgate_plugin_sdk::openai::{ErrorDetail, classify_detail};
use tollgate_plugin_sdk::stream::{ChunkWriter, json_event, tool_call_arguments, tool_call_start};
use tollgate_plugin_sdk::{AdapterError, CallContext, ErrorClass, Event, StreamTranslator, Usage};

use crate::response;

/// Stream position of one exchange.
pub struct StreamState {
    chunks: ChunkWriter,
    /// Output item ids of function calls, by tool-call index.
    calls: Vec<String>,
    finished: bool,
    usage: Option<Usage>,
}

impl StreamState {
    pub fn new(ctx: &CallContext) -> Self {
        StreamState {
            chunks: ChunkWriter::new(ctx),
            calls: Vec::new(),
            finished: false,
            usage: None,
        }
    }

    fn remember(&mut self, response: &Value) {
        let text = |key: &str| response.get(key).and_then(Value::as_str);
        if !self.chunks.has_id()
            && let Some(id) = text("id")
        {
            self.chunks.set_id(id);
        }
        if !self.chunks.has_model()
            && let Some(model) = text("model")
        {
            self.chunks.set_model(model);
        }
        if self.chunks.created() == 0
            && let Some(created) = response.get("created_at").and_then(Value::as_u64)
        {
            self.chunks.set_created(created);
        }
    }
}

impl StreamTranslator for StreamState {
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let Some(data) = json_event(&event.data, "OpenAI's Responses API")? else {
            return Ok(());
        };
        let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or("");
        match data.get("type").and_then(Value::as_str).unwrap_or("") {
            "response.created" | "response.in_progress" => {
                if let Some(response) = data.get("response") {
                    self.remember(response);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if !text("delta").is_empty() {
                    out.push(self.chunks.chunk(json!({ "content": text("delta") }), None)?);
                }
            }
            "response.output_item.added" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
                    let index = self.chunks.next_tool_index();
                    self.calls.push(field("id").to_owned());
                    let delta = tool_call_start(index, field("call_id"), field("name"), field("arguments"));
                    out.push(self.chunks.chunk(delta, None)?);
                }
            }
            "response.function_call_arguments.delta" => {
                let index = self.calls.iter().position(|id| id == text("item_id")).ok_or_else(|| {
                    AdapterError::internal("the Responses stream sent arguments for a call it never started")
                })?;
                if !text("delta").is_empty() {
                    out.push(self.chunks.chunk(tool_call_arguments(index, text("delta")), None)?);
                }
            }
            "response.completed" | "response.incomplete" => {
                let whole = data.get("response").unwrap_or(&Value::Null);
                self.remember(whole);
                self.usage = whole.get("usage").and_then(response::usage).or(self.usage);
                self.finished = true;
                let reason = response::finish_reason(whole, !self.calls.is_empty());
                out.push(self.chunks.chunk(json!({}), Some(reason))?);
            }
            "response.failed" => {
                let whole = data.get("response").unwrap_or(&Value::Null);
                return Err(response::failure(whole).unwrap_or_else(|| {
                    AdapterError::new(
                        ErrorClass::Upstream(500),
                        "the Responses stream failed without an error",
                    )
                }));
            }
            "error" => return Err(classify_detail(&ErrorDetail::from_value(&data))),
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.chunks
            .end(self.finished, "the Responses stream ended before response.completed")
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
    }
}
