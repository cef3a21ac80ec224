//! A Responses API `response` object → a `chat.completion`, and the pieces
//! the stream shares: usage, the finish reason, and a failed response's error.
//!
//! `output` items: a `message`'s `output_text` (and `refusal`) parts become
//! the message text, each `function_call` a tool call (`call_id`, `name`,
//! `arguments` as sent); reasoning and built-in tool items are not part of a
//! chat answer and are left out (their tokens are in the usage).

use serde_json::Value;
use tollgate_plugin_sdk::openai::{self, Answer, ErrorDetail, classify_detail};
use tollgate_plugin_sdk::{AdapterError, CallContext, ErrorClass, ResponseHead, Translated, Usage};

pub fn completion(ctx: &CallContext, head: &ResponseHead, body: &[u8]) -> Result<Translated, AdapterError> {
    let response: Value =
        serde_json::from_slice(body).map_err(|_| AdapterError::internal("upstream returned invalid JSON"))?;
    if let Some(error) = failure(&response) {
        return Err(error);
    }
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for item in response.get("output").and_then(Value::as_array).into_iter().flatten() {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                    text.push_str(part_text(part).unwrap_or(""));
                }
            }
            Some("function_call") => {
                let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
                tool_calls.push(openai::tool_call(field("call_id"), field("name"), field("arguments")));
            }
            _ => {}
        }
    }
    let finish_reason = finish_reason(&response, !tool_calls.is_empty());
    openai::completion(
        ctx,
        head,
        Answer {
            id: response.get("id").and_then(Value::as_str),
            model: response.get("model").and_then(Value::as_str),
            created: response.get("created_at").and_then(Value::as_u64),
            content: Some(text),
            tool_calls,
            null_refusal: true,
            finish_reason,
            usage: response.get("usage").and_then(usage),
        },
    )
}

/// The text of an `output_text` or `refusal` content part.
pub fn part_text(part: &Value) -> Option<&str> {
    match part.get("type").and_then(Value::as_str)? {
        "output_text" => part.get("text").and_then(Value::as_str),
        "refusal" => part.get("refusal").and_then(Value::as_str),
        _ => None,
    }
}

/// A Responses `usage` object: `input_tokens` (cached ones included, as in
/// chat completions' `prompt_tokens`), `output_tokens` (reasoning included),
/// and their details.
pub fn usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let detail = |outer: &str, inner: &str| usage.get(outer).and_then(|d| d.get(inner)).and_then(Value::as_u64);
    Some(Usage {
        input: count("input_tokens").unwrap_or(0),
        output: count("output_tokens").unwrap_or(0),
        cache_read: detail("input_tokens_details", "cached_tokens"),
        cache_write: None,
        reasoning: detail("output_tokens_details", "reasoning_tokens"),
    })
}

/// `length` when the answer stopped at `max_output_tokens`, `content_filter`
/// when it was filtered, else `tool_calls` or `stop`.
pub fn finish_reason(response: &Value, called: bool) -> &'static str {
    if response.get("status").and_then(Value::as_str) == Some("incomplete") {
        return match response.pointer("/incomplete_details/reason").and_then(Value::as_str) {
            Some("content_filter") => "content_filter",
            _ => "length",
        };
    }
    if called { "tool_calls" } else { "stop" }
}

/// The error of a response whose `status` is `failed` (or that carries an
/// `error`), classified as OpenAI's errors are.
pub fn failure(response: &Value) -> Option<AdapterError> {
    let error = response.get("error").filter(|e| !e.is_null());
    let failed = response.get("status").and_then(Value::as_str) == Some("failed");
    match (error, failed) {
        (Some(error), _) => Some(classify_detail(&ErrorDetail::from_value(error))),
        (None, true) => Some(AdapterError::new(
            ErrorClass::Upstream(500),
            "the upstream response failed without saying why",
        )),
        (None, false) => None,
    }
}
