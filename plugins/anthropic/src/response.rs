//! A whole Anthropic `message` → OpenAI `chat.completion`, plus the pieces
//! the stream translation shares: finish reasons, usage, ids.

use serde_json::{Value, json};
use tollgate_plugin_sdk::{AdapterError, CallContext, ResponseHead, Translated, Usage, openai, time};

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
                let input = input_json(block.get("input"))?;
                if shape.json_tool.as_deref() == Some(name) {
                    json_answer = true;
                    content.push_str(&input);
                    continue;
                }
                tool_calls.push(json!({
                    "id": block.get("id").and_then(Value::as_str).unwrap_or(""),
                    "type": "function",
                    "function": { "name": name, "arguments": input },
                }));
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
    let content = if content.is_empty() && !tool_calls.is_empty() {
        Value::Null
    } else {
        Value::String(content)
    };
    let mut message = json!({ "role": "assistant", "content": content });
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let usage = answer.get("usage").and_then(usage);
    let created = openai::header(&head.headers, "date")
        .and_then(time::http_date)
        .unwrap_or(0);
    let mut completion = json!({
        "id": completion_id(ctx, &answer),
        "object": "chat.completion",
        "created": created,
        "model": model(ctx, &answer),
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
    });
    if let Some(usage) = &usage {
        completion["usage"] = openai::usage_json(usage);
    }
    let body = serde_json::to_vec(&completion).map_err(|e| AdapterError::internal(e.to_string()))?;
    Ok(Translated { body, usage })
}

/// A `tool_use` block's `input` as the OpenAI `arguments` JSON string.
fn input_json(input: Option<&Value>) -> Result<String, AdapterError> {
    match input {
        None | Some(Value::Null) => Ok("{}".to_owned()),
        Some(input) => serde_json::to_string(input).map_err(|e| AdapterError::internal(e.to_string())),
    }
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

/// Anthropic's `input_tokens` excludes the prompt tokens read from or
/// written to the cache, which are billed as input too: the gateway's input
/// is their sum, and `cache_read` is the part served from the cache (as
/// OpenAI's `cached_tokens` is part of `prompt_tokens`).
pub fn usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let read = count("cache_read_input_tokens");
    let written = count("cache_creation_input_tokens");
    Some(Usage {
        input: count("input_tokens").unwrap_or(0) + read.unwrap_or(0) + written.unwrap_or(0),
        output: count("output_tokens").unwrap_or(0),
        cache_read: read,
        cache_write: written,
        reasoning: None,
    })
}

/// `chatcmpl-<message id>`, else `chatcmpl-<gateway request id>`.
pub fn completion_id(ctx: &CallContext, message: &Value) -> String {
    let id = message
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .unwrap_or(&ctx.request_id);
    format!("chatcmpl-{id}")
}

/// The model that answered, else the requested one.
pub fn model(ctx: &CallContext, message: &Value) -> String {
    message
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .unwrap_or(&ctx.upstream_model)
        .to_owned()
}
