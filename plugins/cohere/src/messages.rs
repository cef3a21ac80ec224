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
use tollgate_plugin_sdk::AdapterError;

/// Translate the caller's `messages`.
pub fn convert(messages: &[Value]) -> Result<Vec<Value>, AdapterError> {
    let mut out = Vec::with_capacity(messages.len());
    let mut call_ids: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| AdapterError::invalid_request(format!("messages[{i}].role is required")))?;
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                let text = text_of(content, i)?;
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
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| AdapterError::invalid_request(format!("messages[{i}].tool_call_id is required")))?;
                if !call_ids.iter().any(|c| c == id) {
                    return Err(AdapterError::invalid_request(format!(
                        "messages[{i}]: no earlier assistant tool call has id '{id}'"
                    )));
                }
                out.push(json!({"role": "tool", "tool_call_id": id, "content": tool_content(content, i)?}));
            }
            other => {
                return Err(AdapterError::invalid_request(format!(
                    "messages[{i}].role '{other}' is not supported by the Cohere adapter"
                )));
            }
        }
    }
    Ok(out)
}

/// The text of a string or of the `text` (or `refusal`) parts of an array,
/// concatenated.
fn text_of(content: &Value, i: usize) -> Result<String, AdapterError> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for (j, part) in parts.iter().enumerate() {
                let key = match part.get("type").and_then(Value::as_str) {
                    Some("text") => "text",
                    Some("refusal") => "refusal",
                    _ => {
                        return Err(AdapterError::invalid_request(format!(
                            "messages[{i}].content[{j}]: only text parts are allowed here"
                        )));
                    }
                };
                out.push_str(part.get(key).and_then(Value::as_str).unwrap_or(""));
            }
            Ok(out)
        }
        _ => Err(AdapterError::invalid_request(format!(
            "messages[{i}].content must be a string or an array"
        ))),
    }
}

/// A user message's content: text and images.
fn user_content(content: &Value, i: usize) -> Result<Value, AdapterError> {
    let Value::Array(parts) = content else {
        return Ok(Value::String(text_of(content, i)?));
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
            Some("image_url") => out.push(image(part.get("image_url"), &at())?),
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
fn image(image_url: Option<&Value>, at: &str) -> Result<Value, AdapterError> {
    let url = image_url
        .and_then(|u| u.get("url").or(Some(u)))
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::invalid_request(format!("{at}.image_url.url is required")))?;
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
    if let Some(detail) = image_url.and_then(|u| u.get("detail")).and_then(Value::as_str) {
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
    let text = text_of(message.get("content").unwrap_or(&Value::Null), i)?;
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
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| AdapterError::invalid_request(format!("{at}.id is required")))?;
        let function = call.get("function").unwrap_or(&Value::Null);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| AdapterError::invalid_request(format!("{at}.function.name is required")))?;
        let arguments = arguments(function.get("arguments"))
            .ok_or_else(|| AdapterError::invalid_request(format!("{at}.function.arguments must be a JSON object")))?;
        call_ids.push(id.to_owned());
        tool_calls.push(json!({
            "id": id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }));
    }
    let mut out = json!({"role": "assistant", "tool_calls": tool_calls});
    if !text.is_empty() {
        out["tool_plan"] = Value::String(text);
    }
    Ok(Some(out))
}

/// Tool-call `arguments` as the JSON-object text Cohere expects.
fn arguments(raw: Option<&Value>) -> Option<String> {
    match raw {
        None | Some(Value::Null) => Some("{}".to_owned()),
        Some(Value::String(text)) if text.trim().is_empty() => Some("{}".to_owned()),
        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .map(|_| text.clone()),
        Some(object @ Value::Object(_)) => Some(object.to_string()),
        Some(_) => None,
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
