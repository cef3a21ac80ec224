//! Renders a [`Decision`] as an Anthropic `message`, or as the SSE events
//! of a streamed one: `message_start`, `content_block_start`, `ping`, one
//! `content_block_delta` per word of text (later words keep their leading
//! space) or per 8-byte slice of a tool's input JSON (after an empty first
//! `input_json_delta`, as Anthropic sends), `content_block_stop`,
//! `message_delta` (stop reason, output tokens), `message_stop`.
//!
//! With `thinking` enabled the answer starts with a `thinking` block (and
//! the text block is the second, index 1), as Claude's extended thinking
//! answers.
//!
//! Like the API, the answer honours `stop_sequences` (cut before the first
//! match, `stop_reason: "stop_sequence"`) and `max_tokens` (cut to that many
//! words, `stop_reason: "max_tokens"`).

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::neutral::{Answer, Decision};
use crate::text::{word_chunks, word_count};

/// What every rendering of one answer shares.
pub struct Rendered<'a> {
    pub decision: &'a Decision,
    pub model: &'a str,
    pub id: String,
    pub tool_id: String,
    pub stop_sequences: Vec<String>,
    pub max_tokens: u64,
    /// With `thinking` enabled: the reasoning the answer starts with (a
    /// `thinking` block with its `signature`, streamed as `thinking_delta`s
    /// then one `signature_delta`). Its words count as output tokens.
    pub thinking: Option<String>,
}

/// The answer after the request's limits.
enum Content {
    Text {
        text: String,
        stop_reason: &'static str,
        stop_sequence: Option<String>,
        tokens: u64,
    },
    Tool {
        name: String,
        input: Value,
        arguments: String,
    },
}

/// Events before the first content delta: the fault counts skip them as the
/// OpenAI route's counts skip its role chunk.
pub const PREAMBLE: usize = 3;

impl Rendered<'_> {
    fn content(&self) -> Content {
        match &self.decision.answer {
            Answer::ToolCall { name, arguments } => Content::Tool {
                name: name.clone(),
                input: serde_json::from_str(arguments).unwrap_or_else(|_| json!({})),
                arguments: arguments.clone(),
            },
            Answer::Text(text) => {
                let mut text = text.clone();
                let mut stop_reason = "end_turn";
                let mut stop_sequence = None;
                let first = self
                    .stop_sequences
                    .iter()
                    .filter_map(|s| text.find(s.as_str()).map(|at| (at, s)))
                    .min_by_key(|(at, _)| *at);
                if let Some((at, sequence)) = first {
                    text.truncate(at);
                    stop_reason = "stop_sequence";
                    stop_sequence = Some(sequence.clone());
                }
                if word_count(&text) as u64 > self.max_tokens {
                    text = word_chunks(&text).into_iter().take(self.max_tokens as usize).collect();
                    stop_reason = "max_tokens";
                    stop_sequence = None;
                }
                let tokens = if stop_reason == "end_turn" {
                    self.decision.completion_tokens
                } else {
                    word_count(&text) as u64
                };
                Content::Text {
                    text,
                    stop_reason,
                    stop_sequence,
                    tokens,
                }
            }
        }
    }

    /// The thinking block's signature: opaque, and the same for the same answer.
    fn signature(&self) -> String {
        format!("sig_mock_{}", self.id.trim_start_matches("msg_mock_"))
    }

    fn thinking_tokens(&self) -> u64 {
        self.thinking.as_deref().map_or(0, |t| word_count(t) as u64)
    }

    fn usage(&self, output_tokens: u64) -> Value {
        let output_tokens = output_tokens + self.thinking_tokens();
        json!({
            // Anthropic's input_tokens excludes the cached part of the prompt.
            "input_tokens": self.decision.prompt_tokens - self.decision.cache_read - self.decision.cache_write,
            "cache_creation_input_tokens": self.decision.cache_write,
            "cache_read_input_tokens": self.decision.cache_read,
            "output_tokens": output_tokens,
            "service_tier": "standard",
        })
    }

    fn message(&self, content: Vec<Value>, stop_reason: Value, stop_sequence: Value, output_tokens: u64) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": self.usage(output_tokens),
        })
    }

    /// The non-streamed `message`.
    pub fn whole(&self) -> Value {
        let mut message = self.whole_content();
        if let (Some(thinking), Some(Value::Array(content))) = (&self.thinking, message.get_mut("content")) {
            content.insert(
                0,
                json!({"type": "thinking", "thinking": thinking, "signature": self.signature()}),
            );
        }
        message
    }

    fn whole_content(&self) -> Value {
        match self.content() {
            Content::Text {
                text,
                stop_reason,
                stop_sequence,
                tokens,
            } => {
                let blocks = if text.is_empty() {
                    Vec::new()
                } else {
                    vec![json!({"type": "text", "text": text})]
                };
                self.message(blocks, json!(stop_reason), json!(stop_sequence), tokens)
            }
            Content::Tool { name, input, .. } => self.message(
                vec![json!({"type": "tool_use", "id": self.tool_id, "name": name, "input": input})],
                json!("tool_use"),
                Value::Null,
                self.decision.completion_tokens,
            ),
        }
    }

    /// The stream's `(event name, data)` pairs, in order.
    pub fn events(&self) -> Vec<(&'static str, Value)> {
        let start = self.message(Vec::new(), Value::Null, Value::Null, 1);
        let mut events = vec![("message_start", json!({"type": "message_start", "message": start}))];
        let (block, deltas, stop_reason, stop_sequence, tokens) = match self.content() {
            Content::Text {
                text,
                stop_reason,
                stop_sequence,
                tokens,
            } => {
                let deltas: Vec<Value> = word_chunks(&text)
                    .into_iter()
                    .map(|w| json!({"type": "text_delta", "text": w}))
                    .collect();
                (
                    json!({"type": "text", "text": ""}),
                    deltas,
                    stop_reason,
                    stop_sequence,
                    tokens,
                )
            }
            Content::Tool { name, arguments, .. } => {
                let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
                deltas.extend(slices(&arguments, 8).map(|s| json!({"type": "input_json_delta", "partial_json": s})));
                let block = json!({"type": "tool_use", "id": self.tool_id, "name": name, "input": {}});
                (block, deltas, "tool_use", None, self.decision.completion_tokens)
            }
        };
        let mut index = 0;
        if let Some(thinking) = &self.thinking {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            ));
            for words in word_chunks(thinking) {
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": words}}),
                ));
            }
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": self.signature()}}),
            ));
            events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
            index = 1;
        }
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        events.push(("ping", json!({"type": "ping"})));
        for delta in deltas {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        events.push((
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                "usage": {"output_tokens": tokens + self.thinking_tokens()},
            }),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        events
    }
}

/// `text` in pieces of at most `size` bytes, split at char boundaries.
fn slices(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// `event: <name>\ndata: <json>\n\n`.
pub fn sse_frame(name: &str, data: &Value) -> Bytes {
    format!("event: {name}\ndata: {data}\n\n").into()
}
