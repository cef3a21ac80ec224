//! OpenAI `messages` → Cohere v2 `messages`. The roles are the same four
//! (system, user, assistant, tool), so the work is in the content shapes:
//!
//! - `system` / `developer` → `system`, text only;
//! - `user` → `user`: a string stays a string, an array keeps its `text` and
//!   `image_url` parts (data URLs or http(s) URLs, with `detail`);
//! - `assistant` → `assistant`: text `content`, or with tool calls, the
//!   `tool_calls` plus the text as `tool_plan` (the reasoning Cohere writes
//!   before calling tools; the response side turns `tool_plan` into content,
//!   so a round trip gives Cohere back its own plan);
//! - `tool` → `tool` with `tool_call_id`; its id must belong to an earlier
//!   assistant tool call, as Cohere requires.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::{AdapterError, openai};

/// Translate the caller's `messages`.
pub fn convert(messages: &[Value]) -> Result<Vec<Value>, AdapterError> {
    let mut out = Vec::with_capacity(messages.len());
    let mut call_ids: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = openai::role(message, i)?;
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                let text = openai::texts(content, i)?.concat();
                if !text.is_empty() {
                    out.push(json!({"role": "system", "content": text}));
                }
            }
            "user" => out.push(json!({"role": "user", "content": user_content(content, i)?})),
            "assistant" => {
                if let Some(message) = assistant(message, i, &mut call_ids)? {
                    out.push(message);
                }
            }
            "tool" => {
                let id = openai::tool_result_id(message, i, &call_ids)?;
                out.push(json!({"role": "tool", "tool_call_id": id, "content": tool_content(content, i)?}));
            }
            other => return Err(openai::unsupported_role(i, other, "the Cohere adapter")),
        }
    }
    Ok(out)
}

/// A user message's content: text and images.
fn user_content(content: &Value, i: usize) -> Result<Value, AdapterError> {
    let Value::Array(parts) = content else {
        return Ok(Value::String(openai::texts(content, i)?.concat()));
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = || format!("messages[{i}].content[{j}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = part
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| AdapterError::invalid_request(format!("{}.text is required", at())))?;
                out.push(json!({"type": "text", "text": text}));
            }
            Some("image_url") => out.push(image(part, &at())?),
            other => {
                return Err(AdapterError::invalid_request(format!(
                    "{}: content part type {} is not supported by Cohere (text and image_url only)",
                    at(),
                    other.unwrap_or("(missing)")
                )));
            }
        }
    }
    Ok(Value::Array(out))
}

/// An `image_url` part; Cohere takes base64 data URLs and web URLs.
fn image(part: &Value, at: &str) -> Result<Value, AdapterError> {
    let url = openai::image_url(part, at)?;
    let supported = url.starts_with("https://")
        || url.starts_with("http://")
        || (url.starts_with("data:") && url.contains(";base64,"));
    if !supported {
        return Err(AdapterError::invalid_request(format!(
            "{at}: expected a base64 data: URL or an http(s) URL"
        )));
    }
    let mut out = Map::new();
    out.insert("url".into(), Value::from(url));
    if let Some(detail) = part
        .get("image_url")
        .and_then(|u| u.get("detail"))
        .and_then(Value::as_str)
    {
        if !matches!(detail, "auto" | "low" | "high") {
            return Err(AdapterError::invalid_request(format!(
                "{at}.image_url.detail must be auto, low or high"
            )));
        }
        out.insert("detail".into(), Value::from(detail));
    }
    Ok(json!({"type": "image_url", "image_url": out}))
}

/// An assistant turn, or `None` when it says nothing (Cohere rejects empty
/// assistant messages).
fn assistant(message: &Value, i: usize, call_ids: &mut Vec<String>) -> Result<Option<Value>, AdapterError> {
    let text = openai::texts(message.get("content").unwrap_or(&Value::Null), i)?.concat();
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(calls)) => calls.as_slice(),
        Some(_) => {
            return Err(AdapterError::invalid_request(format!(
                "messages[{i}].tool_calls must be an array"
            )));
        }
    };
    if message.get("function_call").is_some_and(|f| !f.is_null()) {
        return Err(AdapterError::invalid_request(format!(
            "messages[{i}]: legacy function_call is not supported by the Cohere adapter; use tool_calls"
        )));
    }
    if calls.is_empty() {
        return Ok((!text.is_empty()).then(|| json!({"role": "assistant", "content": text})));
    }
    let mut tool_calls = Vec::with_capacity(calls.len());
    for (j, call) in calls.iter().enumerate() {
        let at = format!("messages[{i}].tool_calls[{j}]");
        let id = openai::tool_call_id(call, &at)?;
        let function = call.get("function").unwrap_or(&Value::Null);
        let called = openai::function_call(function, &at)?;
        call_ids.push(id.to_owned());
        tool_calls.push(json!({
            "id": id,
            "type": "function",
            "function": {"name": called.name, "arguments": arguments_text(function, &called.arguments)},
        }));
    }
    let mut out = json!({"role": "assistant", "tool_calls": tool_calls});
    if !text.is_empty() {
        out["tool_plan"] = Value::String(text);
    }
    Ok(Some(out))
}

/// Tool-call `arguments` as the JSON-object text Cohere expects: the text
/// the caller sent when it held the object, so Cohere reads back what it wrote.
fn arguments_text(function: &Value, arguments: &Value) -> String {
    match function.get("arguments") {
        Some(Value::String(text)) if !text.trim().is_empty() => text.clone(),
        _ => arguments.to_string(),
    }
}

/// A tool result: a string stays a string (Cohere reads JSON text or plain
/// text), text parts become Cohere text blocks.
fn tool_content(content: &Value, i: usize) -> Result<Value, AdapterError> {
    match content {
        Value::Null => Ok(Value::from("")),
        Value::String(text) => Ok(Value::from(text.as_str())),
        Value::Array(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                match (
                    part.get("type").and_then(Value::as_str),
                    part.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(text)) => out.push(json!({"type": "text", "text": text})),
                    _ => {
                        return Err(AdapterError::invalid_request(format!(
                            "messages[{i}].content[{j}]: tool results take text parts only"
                        )));
                    }
                }
            }
            Ok(Value::Array(out))
        }
        _ => Err(AdapterError::invalid_request(format!(
            "messages[{i}].content must be a string or an array"
        ))),
    }
}
