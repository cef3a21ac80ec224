//! Renders a [`Decision`] as Gemini `GenerateContentResponse`s: one for
//! `generateContent`, or the events of `streamGenerateContent` — one per
//! word of text (later words keep their leading space, so the texts
//! concatenate to the whole answer), a function call whole in one event, and
//! `finishReason` plus final usage on the last event. Every event repeats
//! `usageMetadata` with the running candidate count, as Gemini does.

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::neutral::{Answer, Decision};
use crate::text::{word_chunks, word_count};

/// What every response of one answer shares.
pub struct Rendered<'a> {
    pub decision: &'a Decision,
    pub model: &'a str,
    pub response_id: String,
}

impl Rendered<'_> {
    /// The `generateContent` answer.
    pub fn whole(&self) -> Value {
        let parts = match &self.decision.answer {
            Answer::Text(text) => vec![json!({ "text": text })],
            Answer::ToolCall { name, arguments } => vec![function_call(name, arguments)],
        };
        self.response(parts, Some("STOP"), self.decision.completion_tokens)
    }

    /// The `streamGenerateContent` events, in order.
    pub fn events(&self) -> Vec<Value> {
        match &self.decision.answer {
            Answer::ToolCall { name, arguments } => {
                vec![self.response(
                    vec![function_call(name, arguments)],
                    Some("STOP"),
                    self.decision.completion_tokens,
                )]
            }
            Answer::Text(text) => {
                let words = word_chunks(text);
                if words.is_empty() {
                    return vec![self.response(vec![json!({ "text": text })], Some("STOP"), 0)];
                }
                let last = words.len() - 1;
                let mut so_far = 0;
                words
                    .iter()
                    .enumerate()
                    .map(|(i, word)| {
                        so_far += word_count(word) as u64;
                        let (finish, count) = if i == last {
                            (Some("STOP"), self.decision.completion_tokens)
                        } else {
                            (None, so_far)
                        };
                        self.response(vec![json!({ "text": word })], finish, count)
                    })
                    .collect()
            }
        }
    }

    fn response(&self, parts: Vec<Value>, finish: Option<&str>, candidate_tokens: u64) -> Value {
        let mut candidate = json!({ "content": { "parts": parts, "role": "model" }, "index": 0 });
        if let Some(finish) = finish {
            candidate["finishReason"] = Value::from(finish);
        }
        let prompt = self.decision.prompt_tokens;
        json!({
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": prompt,
                "candidatesTokenCount": candidate_tokens,
                "totalTokenCount": prompt + candidate_tokens,
                "promptTokensDetails": [{ "modality": "TEXT", "tokenCount": prompt }],
            },
            "modelVersion": self.model,
            "responseId": self.response_id,
        })
    }
}

/// A `functionCall` part; the mock's arguments are always a JSON object.
fn function_call(name: &str, arguments: &str) -> Value {
    let args: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
    json!({ "functionCall": { "name": name, "args": args } })
}

/// `data: <json>\r\n\r\n`: Gemini ends SSE events with CRLFs.
pub fn sse_frame(event: &Value) -> Bytes {
    let mut frame = b"data: ".to_vec();
    frame.extend_from_slice(event.to_string().as_bytes());
    frame.extend_from_slice(b"\r\n\r\n");
    frame.into()
}

/// The whole stream as one JSON array, as `streamGenerateContent` answers
/// without `alt=sse`.
pub fn json_array(events: &[Value]) -> Bytes {
    let items: Vec<String> = events.iter().map(Value::to_string).collect();
    format!("[{}]", items.join(",\r\n")).into()
}
