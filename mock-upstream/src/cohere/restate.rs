//! A Cohere v2 chat request restated as an OpenAI chat-completions request,
//! for [`crate::neutral::decide`]. The roles and tool shapes already match,
//! so only contents change:
//! - system and assistant contents → their text (assistant `thinking` blocks
//!   and `tool_plan` are not part of the reply);
//! - user contents pass through (text and `image_url` blocks are OpenAI's);
//! - a tool result → its text: a string as is, text blocks joined by a space,
//!   a `document` block as its `data` (text, or JSON text);
//! - `tool_choice` `REQUIRED` / `NONE` → `required` / `none`;
//! - `response_format` `json_object` → `json_object`, or `json_schema` when it
//!   carries a `json_schema`.

use serde_json::{Map, Value, json};

/// The OpenAI form of `request` (already validated).
pub fn to_openai(request: &Map<String, Value>) -> Value {
    let messages: Vec<Value> = request
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(message)
        .collect();
    let mut out = json!({
        "model": request.get("model").cloned().unwrap_or(Value::Null),
        "messages": messages,
    });
    if let Some(tools) = request
        .get("tools")
        .filter(|t| t.as_array().is_some_and(|t| !t.is_empty()))
    {
        out["tools"] = tools.clone();
        match request.get("tool_choice").and_then(Value::as_str) {
            Some("REQUIRED") => out["tool_choice"] = json!("required"),
            Some("NONE") => out["tool_choice"] = json!("none"),
            _ => {}
        }
    }
    if let Some(format) = request.get("response_format")
        && format.get("type").and_then(Value::as_str) == Some("json_object")
    {
        out["response_format"] = match format.get("json_schema") {
            Some(schema) => json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}),
            None => json!({"type": "json_object"}),
        };
    }
    if let Some(directives) = request.get("mock") {
        out["mock"] = directives.clone();
    }
    out
}

fn message(message: &Value) -> Value {
    let role = message.get("role").and_then(Value::as_str).unwrap_or("user");
    let content = message.get("content").unwrap_or(&Value::Null);
    match role {
        "user" => json!({"role": "user", "content": content}),
        "tool" => json!({
            "role": "tool",
            "tool_call_id": message.get("tool_call_id").cloned().unwrap_or(Value::Null),
            "content": text(content, " "),
        }),
        "assistant" => {
            let mut out = json!({"role": "assistant", "content": text(content, "")});
            if let Some(calls) = message
                .get("tool_calls")
                .filter(|c| c.as_array().is_some_and(|c| !c.is_empty()))
            {
                out["tool_calls"] = calls.clone();
            }
            out
        }
        _ => json!({"role": role, "content": text(content, " ")}),
    }
}

/// The text of a content: a string, or its text (and document) blocks joined
/// by `separator`.
fn text(content: &Value, separator: &str) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => block.get("text").and_then(Value::as_str).map(str::to_owned),
                Some("document") => match block.get("document").and_then(|d| d.get("data")) {
                    Some(Value::String(data)) => Some(data.clone()),
                    Some(data) => Some(data.to_string()),
                    None => None,
                },
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(separator),
        _ => String::new(),
    }
}
