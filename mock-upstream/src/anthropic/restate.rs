//! A Messages API request restated as an OpenAI chat-completions request,
//! for [`crate::neutral::decide`]:
//! - `system` → one `system` message (text blocks joined by a space);
//! - a `user` turn → one `tool` message per `tool_result` block (content: its
//!   text), then a `user` message with its other blocks (images count as
//!   media parts with no words);
//! - an `assistant` turn → an `assistant` message (texts, `tool_use` blocks
//!   as `tool_calls`); a trailing one is a partial answer to continue;
//! - `tools` → function tools; `tool_choice` `auto`/`any`/`tool`/`none` →
//!   `auto`/`required`/named/`none`;
//! - `output_config.format` → `response_format` `json_schema`.

use serde_json::{Map, Value, json};

/// The OpenAI form of `request`.
pub fn to_openai(request: &Map<String, Value>) -> Value {
    let mut messages = Vec::new();
    let system = match request.get("system") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => texts(blocks).join(" "),
        _ => String::new(),
    };
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in request.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let blocks = match message.get("content") {
            Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => Vec::new(),
        };
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => messages.push(assistant(&blocks)),
            _ => user(&blocks, &mut messages),
        }
    }
    let model = request.get("model").cloned().unwrap_or(Value::Null);
    let mut out = json!({ "model": model, "messages": messages });
    let tools: Vec<Value> = request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.get("name").cloned().unwrap_or(Value::Null),
                "parameters": tool.get("input_schema").cloned().unwrap_or_else(|| json!({})),
            }})
        })
        .collect();
    if !tools.is_empty() {
        out["tools"] = Value::Array(tools);
        if let Some(choice) = request.get("tool_choice") {
            out["tool_choice"] = match choice.get("type").and_then(Value::as_str) {
                Some("any") => json!("required"),
                Some("none") => json!("none"),
                Some("tool") => json!({"type": "function", "function": {"name": choice.get("name")}}),
                _ => json!("auto"),
            };
        }
    }
    if let Some(schema) = request
        .get("output_config")
        .and_then(|c| c.get("format"))
        .and_then(|f| f.get("schema"))
    {
        out["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema}});
    }
    if let Some(directives) = request.get("mock") {
        out["mock"] = directives.clone();
    }
    out
}

fn texts(blocks: &[Value]) -> Vec<&str> {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect()
}

fn user(blocks: &[Value], messages: &mut Vec<Value>) {
    let mut rest = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_result") => {
                let content = match block.get("content") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(parts)) => texts(parts).join(" "),
                    _ => String::new(),
                };
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": block.get("tool_use_id").cloned().unwrap_or(Value::Null),
                    "content": content,
                }));
            }
            Some("text") => rest.push(json!({"type": "text", "text": block.get("text")})),
            _ => rest.push(json!({"type": "image_url", "image_url": {"url": "media"}})),
        }
    }
    if !rest.is_empty() {
        messages.push(json!({"role": "user", "content": rest}));
    }
}

fn assistant(blocks: &[Value]) -> Value {
    let text: String = texts(blocks).concat();
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|b| {
            json!({
                "id": b.get("id"),
                "type": "function",
                "function": {
                    "name": b.get("name"),
                    "arguments": b.get("input").map_or_else(|| "{}".to_owned(), Value::to_string),
                },
            })
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
        if text.is_empty() {
            message["content"] = Value::Null;
        }
    }
    message
}
