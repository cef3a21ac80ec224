//! A whole Anthropic `message` → OpenAI `chat.completion`, plus the pieces
//! the stream translation shares: finish reasons and usage.

use serde_json::Value;
use tollgate_plugin_sdk::{AdapterError, CallContext, ResponseHead, Translated, Usage, openai};

use crate::error;
use crate::request::Shape;

/// Translate a non-streamed 2xx answer.
pub fn completion(
    ctx: &CallContext,
    shape: &Shape,
    head: &ResponseHead,
    body: &[u8],
) -> Result<Translated, AdapterError> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|_| AdapterError::internal("Anthropic returned invalid JSON"))?;
    if let Some(error) = error::in_body(&answer) {
        return Err(error);
    }
    if answer.get("type").and_then(Value::as_str) != Some("message") {
        return Err(AdapterError::internal(
            "Anthropic returned something other than a message",
        ));
    }
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    let mut json_answer = false;
    for block in answer.get("content").and_then(Value::as_array).into_iter().flatten() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => content.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                let input = openai::arguments_text(block.get("input"))?;
                if shape.json_tool.as_deref() == Some(name) {
                    json_answer = true;
                    content.push_str(&input);
                    continue;
                }
                let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                tool_calls.push(openai::tool_call(id, name, &input));
            }
            // Thinking, redacted thinking and server-tool blocks have no
            // chat-completions form.
            _ => {}
        }
    }
    if let Some(rest) = content.strip_prefix(shape.trimmed_prefill.as_str()) {
        content = rest.to_owned();
    }
    let stop_reason = answer.get("stop_reason").and_then(Value::as_str);
    let finish_reason = finish_reason(stop_reason, json_answer).unwrap_or("stop");
    openai::completion(
        ctx,
        head,
        openai::Answer {
            id: answer.get("id").and_then(Value::as_str),
            model: answer.get("model").and_then(Value::as_str),
            content: Some(content),
            tool_calls,
            finish_reason,
            usage: answer.get("usage").and_then(usage),
            ..openai::Answer::default()
        },
    )
}

/// `stop_reason` → OpenAI `finish_reason`; `None` while unfinished. A
/// JSON-mode answer arrives as a forced tool call but is plain content.
pub fn finish_reason(stop_reason: Option<&str>, json_answer: bool) -> Option<&'static str> {
    Some(match stop_reason? {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" if json_answer => "stop",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        // end_turn, stop_sequence, pause_turn and anything newer.
        _ => "stop",
    })
}

/// Anthropic's usage, whose `input_tokens` leaves out the prompt tokens read
/// from or written to the cache (see `openai::usage_with_cache_apart`).
pub fn usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    Some(openai::usage_with_cache_apart(
        count("input_tokens"),
        count("output_tokens"),
        count("cache_read_input_tokens"),
        count("cache_creation_input_tokens"),
    ))
}
