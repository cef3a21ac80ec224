//! Renders a [`Decision`] as a Cohere v2 chat answer, whole or as its SSE
//! events:
//! - text: `message-start`, `content-start`, one `content-delta` per word
//!   (later words keep their leading space, so the deltas concatenate to the
//!   whole answer), `content-end`, `message-end`;
//! - a tool call: `message-start`, `tool-call-start` (id and name, empty
//!   arguments), `tool-call-delta`s of at most [`ARGUMENT_PIECE`] bytes,
//!   `tool-call-end`, `message-end`.
//!
//! `usage.billed_units` holds the neutral token counts; `usage.tokens` adds
//! [`PROMPT_TEMPLATE_TOKENS`] to the input, as Cohere's `tokens` also counts
//! the prompt template it wraps around the conversation (and does not bill).

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::neutral::{Answer, Decision};
use crate::text::word_chunks;

/// Tokens of the mock's pretend prompt template (see the module docs).
pub const PROMPT_TEMPLATE_TOKENS: u64 = 100;
/// Largest tool-call arguments fragment per `tool-call-delta`.
pub const ARGUMENT_PIECE: usize = 8;

/// What every response of one answer shares.
pub struct Rendered<'a> {
    pub decision: &'a Decision,
    /// The answer id (a UUID at Cohere).
    pub id: String,
    /// Suffix of tool-call ids, which Cohere forms as `<name>_<random>`.
    pub call_suffix: String,
    /// `COMPLETE`, `STOP_SEQUENCE`, `MAX_TOKENS` or `TOOL_CALL` (see `limits`).
    pub finish: &'static str,
}

impl Rendered<'_> {
    /// The non-streamed answer.
    pub fn whole(&self) -> Value {
        let message = match &self.decision.answer {
            Answer::Text(text) => json!({"role": "assistant", "content": [{"type": "text", "text": text}]}),
            Answer::ToolCall { name, arguments } => json!({"role": "assistant", "tool_calls": [{
                "id": self.call_id(name),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }]}),
        };
        json!({"id": self.id, "message": message, "finish_reason": self.finish, "usage": self.usage()})
    }

    /// The stream's events, in order. The second value is how many events
    /// open the answer before any content (stream faults count after them).
    pub fn events(&self) -> (Vec<Value>, usize) {
        let mut events = vec![json!({
            "id": self.id,
            "type": "message-start",
            "delta": {"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}},
        })];
        match &self.decision.answer {
            Answer::Text(text) => {
                events.push(json!({
                    "type": "content-start",
                    "index": 0,
                    "delta": {"message": {"content": {"type": "text", "text": ""}}},
                }));
                for word in word_chunks(text) {
                    events.push(json!({
                        "type": "content-delta",
                        "index": 0,
                        "delta": {"message": {"content": {"text": word}}},
                    }));
                }
                events.push(json!({"type": "content-end", "index": 0}));
            }
            Answer::ToolCall { name, arguments } => {
                events.push(json!({
                    "type": "tool-call-start",
                    "index": 0,
                    "delta": {"message": {"tool_calls": {
                        "id": self.call_id(name),
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }}},
                }));
                for piece in pieces(arguments) {
                    events.push(json!({
                        "type": "tool-call-delta",
                        "index": 0,
                        "delta": {"message": {"tool_calls": {"function": {"arguments": piece}}}},
                    }));
                }
                events.push(json!({"type": "tool-call-end", "index": 0}));
            }
        }
        events.push(json!({
            "type": "message-end",
            "delta": {"finish_reason": self.finish, "usage": self.usage()},
        }));
        (events, 2)
    }

    /// The `message-end` that ends a stream failing mid-answer.
    pub fn error_end(&self, message: &str) -> Value {
        json!({
            "type": "message-end",
            "delta": {"error": message, "finish_reason": "ERROR", "usage": self.usage()},
        })
    }

    fn call_id(&self, name: &str) -> String {
        format!("{name}_{}", self.call_suffix)
    }

    fn usage(&self) -> Value {
        let (input, output) = (self.decision.prompt_tokens, self.decision.completion_tokens);
        json!({
            "billed_units": {"input_tokens": input, "output_tokens": output},
            "tokens": {"input_tokens": input + PROMPT_TEMPLATE_TOKENS, "output_tokens": output},
        })
    }
}

/// `text` in pieces of at most [`ARGUMENT_PIECE`] bytes, cut on character
/// boundaries.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = ARGUMENT_PIECE.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    out
}

/// `event: <type>\ndata: <json>\n\n`, as Cohere frames its stream.
pub fn sse_frame(event: &Value) -> Bytes {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("message");
    format!("event: {kind}\ndata: {event}\n\n").into()
}
