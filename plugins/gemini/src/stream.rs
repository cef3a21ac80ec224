//! `streamGenerateContent?alt=sse` → `chat.completion.chunk`s.
//!
//! Every SSE event carries a whole `GenerateContentResponse` holding only the
//! new parts: text grows a few words at a time, a function call arrives whole.
//! Each text part becomes a content delta and each call a complete tool-call
//! delta (`index`, `id`, `type`, `function.name`, `function.arguments`); the
//! first chunk also carries `role: "assistant"`. The candidate's
//! `finishReason` becomes a chunk with an empty delta and the finish reason;
//! [`StreamState::finish`] then adds a `choices: []` chunk the host puts usage
//! and cost on, as OpenAI's `include_usage` stream ends. `usageMetadata`
//! repeats on every event with running totals: the last one wins.
//!
//! Gemini sends no end marker: a stream that ends before any `finishReason`
//! was cut short, and is reported as an upstream failure (so the gateway can
//! fail over and continue the answer elsewhere).

use serde_json::{Value, json};
use tollgate_plugin_sdk::stream::{ChunkWriter, json_event, tool_call_start};
use tollgate_plugin_sdk::{AdapterError, CallContext, Event, StreamTranslator, Usage, openai, time};

use crate::error;
use crate::response::{self, Part};

/// Stream position of one exchange.
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

    /// Id, model and creation time come from the first event that has them.
    fn remember(&mut self, answer: &Value) {
        if !self.chunks.has_id()
            && let Some(id) = answer.get("responseId").and_then(Value::as_str)
        {
            self.chunks.set_id(id);
        }
        if !self.chunks.has_model()
            && let Some(model) = answer.get("modelVersion").and_then(Value::as_str)
        {
            self.chunks.set_model(model);
        }
        if self.chunks.created() == 0
            && let Some(created) = answer.get("createTime").and_then(Value::as_str).and_then(time::rfc3339)
        {
            self.chunks.set_created(created);
        }
    }
}

impl StreamTranslator for StreamState {
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let Some(answer) = json_event(&event.data, "Gemini")? else {
            return Ok(());
        };
        if let Some(error) = error::in_body(&answer) {
            return Err(error);
        }
        self.remember(&answer);
        if let Some(usage) = answer.get("usageMetadata").and_then(response::usage) {
            self.usage = Some(usage);
        }
        let Some(candidate) = answer
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            // A usage-only event, or a prompt Gemini refused.
            return match response::blocked(&answer) {
                Some(error) => Err(error),
                None => Ok(()),
            };
        };
        for part in response::parts(candidate) {
            let delta = match part {
                Part::Text("") => continue,
                Part::Text(text) => json!({ "content": text }),
                Part::Call { name, args } => {
                    let index = self.chunks.next_tool_index();
                    let arguments = openai::arguments_text(args)?;
                    tool_call_start(index, &response::call_id(index), name, &arguments)
                }
            };
            out.push(self.chunks.chunk(delta, None)?);
        }
        if let Some(reason) = response::finish_reason(candidate, self.chunks.tool_calls() > 0) {
            self.finished = true;
            out.push(self.chunks.chunk(json!({}), Some(reason))?);
        }
        Ok(())
    }

    /// The stream ended: the closing chunk, or an error if it was cut short.
    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.chunks.end(
            self.finished,
            "Gemini's stream ended before the answer finished (no finishReason)",
        )
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
    }
}
