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
use tollgate_plugin_sdk::stream::{EventData, event_data};
use tollgate_plugin_sdk::{AdapterError, CallContext, ErrorClass, Event, Usage, time};

use crate::error;
use crate::response::{self, Part};

/// Stream position of one exchange.
pub struct StreamState {
    request_id: String,
    upstream_model: String,
    /// `chatcmpl-…`, fixed by the first event.
    id: Option<String>,
    model: Option<String>,
    created: u64,
    role_sent: bool,
    tool_calls: usize,
    finished: bool,
    usage: Option<Usage>,
}

impl StreamState {
    pub fn new(ctx: &CallContext) -> Self {
        StreamState {
            request_id: ctx.request_id.clone(),
            upstream_model: ctx.upstream_model.clone(),
            id: None,
            model: None,
            created: 0,
            role_sent: false,
            tool_calls: 0,
            finished: false,
            usage: None,
        }
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Translate one event, appending its chunks to `out`.
    pub fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let text = match event_data(&event.data)? {
            EventData::Empty | EventData::Done => return Ok(()),
            EventData::Json(text) => text,
        };
        let answer: Value = serde_json::from_str(text)
            .map_err(|_| AdapterError::internal("Gemini sent an invalid JSON stream event"))?;
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
                    let index = self.tool_calls;
                    self.tool_calls += 1;
                    json!({
                        "content": null,
                        "tool_calls": [{
                            "index": index,
                            "id": response::call_id(index),
                            "type": "function",
                            "function": { "name": name, "arguments": response::arguments(args)? },
                        }],
                    })
                }
            };
            out.push(self.chunk(delta, None)?);
        }
        if let Some(reason) = response::finish_reason(candidate, self.tool_calls > 0) {
            self.finished = true;
            out.push(self.chunk(json!({}), Some(reason))?);
        }
        Ok(())
    }

    /// The stream ended: the closing chunk, or an error if it was cut short.
    pub fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        if !self.finished {
            return Err(AdapterError::new(
                ErrorClass::Upstream(502),
                "Gemini's stream ended before the answer finished (no finishReason)",
            ));
        }
        let chunk = json!({
            "id": self.id(),
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model(),
            "choices": [],
        });
        Ok(vec![
            serde_json::to_vec(&chunk).map_err(|e| AdapterError::internal(e.to_string()))?,
        ])
    }

    /// Id, model and creation time come from the first event that has them.
    fn remember(&mut self, answer: &Value) {
        if self.id.is_none()
            && let Some(id) = answer
                .get("responseId")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
        {
            self.id = Some(format!("chatcmpl-{id}"));
        }
        if self.model.is_none()
            && let Some(model) = answer
                .get("modelVersion")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
        {
            self.model = Some(model.to_owned());
        }
        if self.created == 0
            && let Some(created) = answer.get("createTime").and_then(Value::as_str).and_then(time::rfc3339)
        {
            self.created = created;
        }
    }

    fn id(&self) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| format!("chatcmpl-{}", self.request_id))
    }

    fn model(&self) -> &str {
        self.model.as_deref().unwrap_or(&self.upstream_model)
    }

    /// One chunk with one choice; the first also names the role.
    fn chunk(&mut self, mut delta: Value, finish_reason: Option<&str>) -> Result<Vec<u8>, AdapterError> {
        if !self.role_sent {
            self.role_sent = true;
            delta["role"] = Value::from("assistant");
            if delta.get("content").is_none() {
                delta["content"] = Value::from("");
            }
        }
        let chunk = json!({
            "id": self.id(),
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model(),
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason }],
        });
        serde_json::to_vec(&chunk).map_err(|e| AdapterError::internal(e.to_string()))
    }
}
