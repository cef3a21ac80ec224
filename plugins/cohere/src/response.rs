//! A whole v2 chat answer → OpenAI `chat.completion`, plus the pieces the
//! stream translation shares: finish reasons and usage.

use serde_json::Value;
use tollgate_plugin_sdk::{AdapterError, CallContext, ErrorClass, ResponseHead, Translated, Usage, openai};

use crate::error;

/// Translate a non-streamed 2xx answer.
pub fn completion(ctx: &CallContext, head: &ResponseHead, body: &[u8]) -> Result<Translated, AdapterError> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|_| AdapterError::internal("Cohere returned invalid JSON"))?;
    let message = match answer.get("message") {
        Some(message @ Value::Object(_)) => message,
        // An error body that came with a 2xx status.
        Some(Value::String(text)) => return Err(error::reported(text)),
        _ => return Err(AdapterError::internal("Cohere's answer has no message")),
    };
    let mut content: String = message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|item| item.get("type").and_then(Value::as_str).unwrap_or("text") == "text")
        .filter_map(|item| item.get("text").and_then(Value::as_str))
        .collect();
    let tool_calls: Vec<Value> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(tool_call)
        .collect::<Result<_, _>>()?;
    if content.is_empty() && !tool_calls.is_empty() {
        // The model's plan before calling tools, as OpenAI models put text
        // before a call in `content` (see `messages` for the way back).
        content = message
            .get("tool_plan")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
    }
    let finish_reason = finish_reason(
        answer.get("finish_reason").and_then(Value::as_str),
        !tool_calls.is_empty(),
    )?;
    openai::completion(
        ctx,
        head,
        openai::Answer {
            id: answer.get("id").and_then(Value::as_str),
            content: Some(content),
            tool_calls,
            finish_reason,
            usage: answer.get("usage").and_then(usage),
            ..openai::Answer::default()
        },
    )
}

/// A Cohere tool call (already OpenAI-shaped) with its fields checked.
fn tool_call(call: &Value) -> Result<Value, AdapterError> {
    let id = call.get("id").and_then(Value::as_str);
    let function = call.get("function");
    let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
    let (Some(id), Some(name)) = (id, name) else {
        return Err(AdapterError::internal("Cohere returned a tool call without id or name"));
    };
    let arguments = function
        .and_then(|f| f.get("arguments"))
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .unwrap_or("{}");
    Ok(openai::tool_call(id, name, arguments))
}

/// The OpenAI finish reason of a Cohere one. `ERROR` and `TIMEOUT` mean the
/// answer is unusable: they are upstream failures, so the gateway can fail
/// over.
pub fn finish_reason(reason: Option<&str>, called_tools: bool) -> Result<&'static str, AdapterError> {
    Ok(match reason {
        Some("MAX_TOKENS") => "length",
        Some("TOOL_CALL") => "tool_calls",
        Some("ERROR") => {
            return Err(AdapterError::new(
                ErrorClass::Upstream(502),
                "Cohere stopped with finish_reason ERROR",
            ));
        }
        Some("TIMEOUT") => {
            return Err(AdapterError::new(
                ErrorClass::Upstream(504),
                "Cohere stopped with finish_reason TIMEOUT",
            ));
        }
        // COMPLETE, STOP_SEQUENCE, and reasons added later.
        _ if called_tools => "tool_calls",
        _ => "stop",
    })
}

/// `usage` → usage, billed from `billed_units` (what Cohere invoices at its
/// list prices; `tokens` also counts the prompt template Cohere adds), with
/// `tokens` as the fallback when no billed units are reported.
/// `cached_tokens` (prompt tokens served from Cohere's cache) → cache-read.
pub fn usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let has_counts = |v: &&Value| v.get("input_tokens").is_some() || v.get("output_tokens").is_some();
    let counts = usage
        .get("billed_units")
        .filter(has_counts)
        .or_else(|| usage.get("tokens").filter(has_counts))?;
    let count = |v: Option<&Value>| {
        v.and_then(Value::as_f64)
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n as u64)
    };
    Some(Usage {
        input: count(counts.get("input_tokens")).unwrap_or(0),
        output: count(counts.get("output_tokens")).unwrap_or(0),
        cache_read: count(usage.get("cached_tokens")),
        cache_write: None,
        reasoning: None,
    })
}
