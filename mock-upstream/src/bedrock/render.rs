//! A [`Decision`] rendered as a Converse answer or as ConverseStream events.
//! The stream mirrors the OpenAI route's chunking: one text delta per word
//! (`text::word_chunks`), tool input in about three fragments.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::neutral::{Answer, Decision};
use crate::text::{fragments, word_chunks};

/// Tool input is streamed in about this many fragments, as on the OpenAI route.
const INPUT_FRAGMENTS: usize = 3;

/// Bedrock pads every stream event with a `p` field of varying length, so
/// payload sizes do not reveal the tokens; clients must ignore it.
const PADDING: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

pub struct Rendered<'d> {
    decision: &'d Decision,
    tool_use_id: String,
    latency_ms: u64,
}

impl<'d> Rendered<'d> {
    pub fn new(decision: &'d Decision, n: u64, latency_ms: u64) -> Self {
        Rendered {
            decision,
            tool_use_id: format!("tooluse_mock_{n}"),
            latency_ms,
        }
    }

    fn stop_reason(&self) -> &'static str {
        match self.decision.answer {
            Answer::Text(_) => "end_turn",
            Answer::ToolCall { .. } => "tool_use",
        }
    }

    fn usage(&self) -> Value {
        let (input, output) = (self.decision.prompt_tokens, self.decision.completion_tokens);
        json!({ "inputTokens": input, "outputTokens": output, "totalTokens": input + output })
    }

    /// The `Converse` answer.
    pub fn converse_response(&self, request_id: &str) -> Response {
        let content = match &self.decision.answer {
            Answer::Text(text) => json!([{ "text": text }]),
            Answer::ToolCall { name, arguments } => json!([{ "toolUse": {
                "toolUseId": self.tool_use_id,
                "name": name,
                "input": serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!({})),
            }}]),
        };
        let body = json!({
            "output": { "message": { "role": "assistant", "content": content } },
            "stopReason": self.stop_reason(),
            "usage": self.usage(),
            "metrics": { "latencyMs": self.latency_ms },
        });
        let mut response = ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response();
        if let Ok(value) = HeaderValue::from_str(request_id) {
            response.headers_mut().insert("x-amzn-requestid", value);
        }
        response
    }

    /// The `ConverseStream` events, `(:event-type, payload)`: `messageStart`,
    /// the content block's events, `messageStop`, `metadata`. Fault plans count
    /// them like the OpenAI route counts chunks (`messageStart` is the role
    /// chunk).
    pub fn stream_events(&self) -> Vec<(&'static str, Value)> {
        let mut events = vec![("messageStart", json!({ "role": "assistant" }))];
        match &self.decision.answer {
            Answer::Text(text) => {
                for word in word_chunks(text) {
                    events.push((
                        "contentBlockDelta",
                        json!({ "contentBlockIndex": 0, "delta": { "text": word } }),
                    ));
                }
            }
            Answer::ToolCall { name, arguments } => {
                events.push((
                    "contentBlockStart",
                    json!({ "contentBlockIndex": 0, "start": { "toolUse": {
                        "toolUseId": self.tool_use_id, "name": name
                    }}}),
                ));
                for fragment in fragments(arguments, INPUT_FRAGMENTS) {
                    events.push((
                        "contentBlockDelta",
                        json!({ "contentBlockIndex": 0, "delta": { "toolUse": { "input": fragment } } }),
                    ));
                }
            }
        }
        events.push(("contentBlockStop", json!({ "contentBlockIndex": 0 })));
        events.push(("messageStop", json!({ "stopReason": self.stop_reason() })));
        events.push((
            "metadata",
            json!({ "usage": self.usage(), "metrics": { "latencyMs": self.latency_ms } }),
        ));
        for (index, (_, payload)) in events.iter_mut().enumerate() {
            let length = 1 + (index * 7) % (PADDING.len() - 1);
            payload["p"] = Value::from(&PADDING[..length]);
        }
        events
    }
}
