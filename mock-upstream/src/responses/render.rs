//! Renders a [`Decision`] as a Responses API `response`, whole or as its SSE
//! events (`event: <type>` + `data: {"type": …, "sequence_number": n}`):
//! - text: `response.created`, `response.in_progress`,
//!   `response.output_item.added` (a `message`), `response.content_part.added`,
//!   one `response.output_text.delta` per word (later words keep their
//!   leading space, so the deltas concatenate to the whole text),
//!   `response.output_text.done`, `response.content_part.done`,
//!   `response.output_item.done`, then `response.completed` (or
//!   `response.incomplete` when `max_output_tokens` cut the text);
//! - a tool call: `response.output_item.added` (a `function_call` with empty
//!   arguments), up to [`ARGUMENT_PIECES`] `response.function_call_arguments.delta`s,
//!   `response.function_call_arguments.done`, `response.output_item.done`,
//!   `response.completed`.
//!
//! `usage` holds the neutral token counts, the cached ones as
//! `input_tokens_details.cached_tokens`.

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::neutral::{Answer, Decision};
use crate::text::{fragments, word_chunks};

/// How many pieces a tool call's arguments stream in, as on the chat route.
pub const ARGUMENT_PIECES: usize = 3;
/// `created_at` of every mock response (the mock has no use for a clock).
const CREATED_AT: u64 = 1_700_000_000;

pub struct Rendered<'a> {
    decision: &'a Decision,
    id: String,
    item_id: String,
    model: &'a str,
    /// The reply text after `max_output_tokens`, and whether it was cut.
    text: Option<(String, bool)>,
}

impl<'a> Rendered<'a> {
    pub fn new(decision: &'a Decision, n: u64, model: &'a str, max_output_tokens: Option<u64>) -> Self {
        let text = match &decision.answer {
            Answer::Text(text) => {
                let words = word_chunks(text);
                Some(match max_output_tokens {
                    Some(limit) if (words.len() as u64) > limit => (words[..limit as usize].concat(), true),
                    _ => (text.clone(), false),
                })
            }
            Answer::ToolCall { .. } => None,
        };
        let item_id = match &decision.answer {
            Answer::Text(_) => format!("msg_mock{n}"),
            Answer::ToolCall { .. } => format!("fc_mock{n}"),
        };
        Rendered {
            decision,
            id: format!("resp_mock{n}"),
            item_id,
            model,
            text,
        }
    }

    fn cut(&self) -> bool {
        self.text.as_ref().is_some_and(|(_, cut)| *cut)
    }

    fn output_tokens(&self) -> u64 {
        match &self.text {
            Some((text, _)) => crate::text::word_count(text) as u64,
            None => self.decision.completion_tokens,
        }
    }

    fn usage(&self) -> Value {
        let (input, output) = (self.decision.prompt_tokens, self.output_tokens());
        json!({
            "input_tokens": input,
            "input_tokens_details": {"cached_tokens": self.decision.cache_read},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input + output,
        })
    }

    /// The finished output item.
    fn item(&self) -> Value {
        match (&self.decision.answer, &self.text) {
            (_, Some((text, _))) => json!({
                "id": self.item_id, "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
            }),
            (Answer::ToolCall { name, arguments }, None) => json!({
                "id": self.item_id, "type": "function_call", "status": "completed",
                "call_id": format!("call_{}", self.item_id), "name": name, "arguments": arguments,
            }),
            (Answer::Text(_), None) => unreachable!("text answers keep their text"),
        }
    }

    fn response(&self, status: &str, output: Vec<Value>, usage: Value) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": CREATED_AT,
            "status": status,
            "error": null,
            "incomplete_details": if status == "incomplete" { json!({"reason": "max_output_tokens"}) } else { Value::Null },
            "model": self.model,
            "output": output,
            "parallel_tool_calls": true,
            "store": false,
            "usage": usage,
        })
    }

    fn status(&self) -> &'static str {
        if self.cut() { "incomplete" } else { "completed" }
    }

    /// The non-streamed answer.
    pub fn whole(&self) -> Value {
        self.response(self.status(), vec![self.item()], self.usage())
    }

    /// The stream's events, in order, and how many open the answer before
    /// any content (stream faults count after them).
    pub fn events(&self) -> (Vec<Value>, usize) {
        let started = self.response("in_progress", vec![], Value::Null);
        let mut events = vec![
            json!({"type": "response.created", "response": started}),
            json!({"type": "response.in_progress", "response": started}),
        ];
        let item = self.item();
        let opening = match &self.text {
            Some((text, _)) => {
                let mut empty = item.clone();
                empty["status"] = Value::from("in_progress");
                empty["content"] = json!([]);
                events.push(json!({"type": "response.output_item.added", "output_index": 0, "item": empty}));
                let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
                events.push(json!({"type": "response.content_part.added", "item_id": self.item_id,
                                   "output_index": 0, "content_index": 0, "part": part}));
                let opening = events.len();
                for word in word_chunks(text) {
                    events.push(json!({"type": "response.output_text.delta", "item_id": self.item_id,
                                       "output_index": 0, "content_index": 0, "delta": word, "logprobs": []}));
                }
                events.push(json!({"type": "response.output_text.done", "item_id": self.item_id,
                                   "output_index": 0, "content_index": 0, "text": text, "logprobs": []}));
                events.push(json!({"type": "response.content_part.done", "item_id": self.item_id,
                                   "output_index": 0, "content_index": 0, "part": item["content"][0]}));
                opening
            }
            None => {
                let arguments = item["arguments"].as_str().unwrap_or("").to_owned();
                let mut empty = item.clone();
                empty["status"] = Value::from("in_progress");
                empty["arguments"] = Value::from("");
                events.push(json!({"type": "response.output_item.added", "output_index": 0, "item": empty}));
                let opening = events.len();
                for piece in fragments(&arguments, ARGUMENT_PIECES) {
                    events.push(
                        json!({"type": "response.function_call_arguments.delta", "item_id": self.item_id,
                                       "output_index": 0, "delta": piece}),
                    );
                }
                events.push(
                    json!({"type": "response.function_call_arguments.done", "item_id": self.item_id,
                                   "output_index": 0, "name": item["name"], "arguments": arguments}),
                );
                opening
            }
        };
        events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
        let done = if self.cut() {
            "response.incomplete"
        } else {
            "response.completed"
        };
        events.push(json!({"type": done, "response": self.whole()}));
        for (n, event) in events.iter_mut().enumerate() {
            event["sequence_number"] = Value::from(n);
        }
        (events, opening)
    }
}

/// `event: <type>` + `data: <event>`.
pub fn sse_frame(event: &Value) -> Bytes {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("message");
    format!("event: {kind}\ndata: {event}\n\n").into()
}

/// Sent in place of the rest of a stream by `stream_error_after`.
pub fn rate_limited_event() -> Value {
    json!({"type": "error", "code": "rate_limit_exceeded", "message": "rate limited", "param": null})
}
