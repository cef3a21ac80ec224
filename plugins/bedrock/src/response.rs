//! A Converse answer → an OpenAI `chat.completion`; also the usage and stop
//! reason mappings the stream shares.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tollgate_plugin_sdk::{AdapterError, CallContext, ResponseHead, Translated, Usage, openai};

use crate::request::Shape;

/// The parts of a Converse answer the adapter reads. Tool inputs stay raw so
/// their key order reaches the caller as the model wrote it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    output: Option<Output>,
    stop_reason: Option<String>,
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct Output {
    message: Option<AnswerMessage>,
}

#[derive(Deserialize)]
struct AnswerMessage {
    #[serde(default)]
    content: Vec<AnswerBlock>,
}

/// A content block; members other than these (reasoningContent, citations,
/// …) have no OpenAI form and are skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerBlock {
    text: Option<String>,
    tool_use: Option<AnswerToolUse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerToolUse {
    tool_use_id: Option<String>,
    #[serde(default)]
    name: String,
    input: Option<Box<RawValue>>,
}

/// The `chat.completion` and the usage it reports.
pub fn completion(
    ctx: &CallContext,
    shape: &Shape,
    head: &ResponseHead,
    body: &[u8],
) -> Result<Translated, AdapterError> {
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| AdapterError::internal(format!("Bedrock returned an answer that is not Converse JSON: {e}")))?;
    let blocks = answer
        .output
        .and_then(|o| o.message)
        .ok_or_else(|| AdapterError::internal("Bedrock's answer has no output.message"))?
        .content;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        if let Some(part) = block.text {
            text.push_str(&part);
        } else if let Some(tool_use) = block.tool_use {
            let input = tool_use
                .input
                .as_deref()
                .map_or_else(|| "{}".to_owned(), |raw| compact_json(raw.get()));
            if Some(tool_use.name.as_str()) == shape.response_tool.as_deref() {
                // The structured answer: its input is the content.
                text.push_str(&input);
                continue;
            }
            let id = tool_use
                .tool_use_id
                .ok_or_else(|| AdapterError::internal("Bedrock sent a toolUse block without toolUseId"))?;
            tool_calls.push(openai::tool_call(&id, &tool_use.name, &input));
        }
    }
    let text = strip_prefix_whitespace(&text, &shape.prefill_whitespace);
    let stop_reason = answer.stop_reason.as_deref().unwrap_or("end_turn");
    let called_tools = !tool_calls.is_empty();
    openai::completion(
        ctx,
        head,
        openai::Answer {
            content: Some(text.to_owned()),
            tool_calls,
            null_refusal: true,
            finish_reason: finish_reason(stop_reason, called_tools),
            usage: answer.usage.as_ref().and_then(usage_from),
            // Converse answers have no id: the gateway's request id names the completion.
            ..openai::Answer::default()
        },
    )
}

/// Valid JSON text without the whitespace between tokens, keys in their
/// order (what a streamed answer's input deltas concatenate to).
fn compact_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !c.is_ascii_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

/// Drops `whitespace` from the start of `text` when it is there (see
/// `Prepared::prefill_whitespace`).
pub fn strip_prefix_whitespace<'t>(text: &'t str, whitespace: &str) -> &'t str {
    text.strip_prefix(whitespace).unwrap_or(text)
}

/// Converse `stopReason` → OpenAI `finish_reason`. `tool_use` is `tool_calls`
/// only when a caller's tool was called (not just the response tool).
pub fn finish_reason(stop_reason: &str, called_tools: bool) -> &'static str {
    match stop_reason {
        "tool_use" if called_tools => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "guardrail_intervened" | "content_filtered" => "content_filter",
        _ => "stop",
    }
}

/// Converse `usage`, whose `inputTokens` leaves out cache reads and writes
/// (see `openai::usage_with_cache_apart`).
pub fn usage_from(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    Some(openai::usage_with_cache_apart(
        count("inputTokens"),
        count("outputTokens"),
        count("cacheReadInputTokens"),
        count("cacheWriteInputTokens"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_includes_cache_tokens() {
        let u = usage_from(&json!({"inputTokens": 10, "outputTokens": 3, "totalTokens": 33,
            "cacheReadInputTokens": 15, "cacheWriteInputTokens": 5}))
        .unwrap();
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write),
            (30, 3, Some(15), Some(5))
        );
        assert_eq!(
            openai::usage_json(&u),
            json!({"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33,
                   "prompt_tokens_details": {"cached_tokens": 15}})
        );
        assert_eq!(usage_from(&json!(null)), None);
    }

    #[test]
    fn compacts_json_keeping_strings() {
        assert_eq!(
            compact_json("{ \"b\" : [1, 2],\n \"a\": \"x y \\\" z\" }"),
            r#"{"b":[1,2],"a":"x y \" z"}"#
        );
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(finish_reason("end_turn", false), "stop");
        assert_eq!(finish_reason("stop_sequence", false), "stop");
        assert_eq!(finish_reason("tool_use", true), "tool_calls");
        assert_eq!(finish_reason("tool_use", false), "stop");
        assert_eq!(finish_reason("max_tokens", true), "length");
        assert_eq!(finish_reason("guardrail_intervened", false), "content_filter");
        assert_eq!(finish_reason("content_filtered", false), "content_filter");
    }
}
