//! A whole `GenerateContentResponse` → OpenAI `chat.completion`, plus the
//! pieces the stream translation shares: candidate parts, finish reasons,
//! usage, tool-call ids.

use serde_json::Value;
use tollgate_plugin_sdk::{AdapterError, CallContext, ResponseHead, Translated, Usage, openai, time};

use crate::error;

/// Translate a non-streamed 2xx answer.
pub fn completion(ctx: &CallContext, head: &ResponseHead, body: &[u8]) -> Result<Translated, AdapterError> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|_| AdapterError::internal("Gemini returned invalid JSON"))?;
    if let Some(error) = error::in_body(&answer) {
        return Err(error);
    }
    let candidate = first_candidate(&answer)?;
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    for part in parts(candidate) {
        match part {
            Part::Text(text) => content.push_str(text),
            Part::Call { name, args } => {
                let id = call_id(tool_calls.len());
                tool_calls.push(openai::tool_call(&id, name, &openai::arguments_text(args)?));
            }
        }
    }
    let finish_reason = finish_reason(candidate, !tool_calls.is_empty()).unwrap_or("stop");
    // A filtered answer says nothing, rather than an empty text.
    let filtered = content.is_empty() && finish_reason == "content_filter";
    openai::completion(
        ctx,
        head,
        openai::Answer {
            id: answer.get("responseId").and_then(Value::as_str),
            model: answer.get("modelVersion").and_then(Value::as_str),
            created: answer.get("createTime").and_then(Value::as_str).and_then(time::rfc3339),
            content: (!filtered).then_some(content),
            tool_calls,
            finish_reason,
            usage: answer.get("usageMetadata").and_then(usage),
            ..openai::Answer::default()
        },
    )
}

/// The first candidate; a prompt Gemini blocked has none.
pub fn first_candidate(answer: &Value) -> Result<&Value, AdapterError> {
    match answer
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    {
        Some(candidate) => Ok(candidate),
        None => Err(blocked(answer).unwrap_or_else(|| AdapterError::internal("Gemini returned no candidates"))),
    }
}

/// `promptFeedback.blockReason`: Gemini refused the prompt itself. Not
/// retryable elsewhere with the same prompt, so it is the caller's problem.
pub fn blocked(answer: &Value) -> Option<AdapterError> {
    let reason = answer.get("promptFeedback")?.get("blockReason")?.as_str()?;
    Some(AdapterError::invalid_request(format!(
        "Gemini blocked the prompt (blockReason {reason})"
    )))
}

/// One useful part of a candidate's content.
pub enum Part<'a> {
    Text(&'a str),
    Call { name: &'a str, args: Option<&'a Value> },
}

/// Text and function-call parts, in order. Thought summaries (`thought:
/// true`) and parts this adapter does not translate (code execution, inline
/// media) are skipped.
pub fn parts(candidate: &Value) -> impl Iterator<Item = Part<'_>> {
    candidate
        .get("content")
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|part| part.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|part| {
            if let Some(call) = part.get("functionCall") {
                let name = call.get("name").and_then(Value::as_str)?;
                return Some(Part::Call {
                    name,
                    args: call.get("args"),
                });
            }
            part.get("text").and_then(Value::as_str).map(Part::Text)
        })
}

/// Gemini has no tool-call ids: the n-th call of an answer is `call_<n>`.
/// Tool results are matched back by the function name (see `messages`).
pub fn call_id(index: usize) -> String {
    format!("call_{index}")
}

/// The OpenAI finish reason of a candidate, `None` while it is unfinished.
pub fn finish_reason(candidate: &Value, called_tools: bool) -> Option<&'static str> {
    let reason = candidate.get("finishReason")?.as_str()?;
    Some(match reason {
        "MAX_TOKENS" => "length",
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => "content_filter",
        // STOP, and reasons OpenAI has no word for (OTHER, LANGUAGE,
        // MALFORMED_FUNCTION_CALL, …).
        _ if called_tools => "tool_calls",
        _ => "stop",
    })
}

/// `usageMetadata` → usage. Gemini counts thinking tokens apart from the
/// answer (`thoughtsTokenCount`) but bills them as output, so output includes
/// them (as OpenAI's `completion_tokens` includes reasoning tokens).
/// `cachedContentTokenCount` is part of `promptTokenCount`, like OpenAI's
/// `cached_tokens`; tool-use prompt tokens are billed as input.
pub fn usage(meta: &Value) -> Option<Usage> {
    let meta = meta.as_object()?;
    let count = |key: &str| meta.get(key).and_then(Value::as_u64);
    let thoughts = count("thoughtsTokenCount");
    Some(Usage {
        input: count("promptTokenCount").unwrap_or(0) + count("toolUsePromptTokenCount").unwrap_or(0),
        output: count("candidatesTokenCount").unwrap_or(0) + thoughts.unwrap_or(0),
        cache_read: count("cachedContentTokenCount"),
        cache_write: None,
        reasoning: thoughts,
    })
}
