//! A Converse request restated as the OpenAI chat request [`neutral::decide`]
//! answers, shaped as an OpenAI client would send the same conversation so
//! token counts match: the system blocks are one system message, a
//! user turn's `toolResult` blocks are `tool` messages (before the turn's own
//! text), an assistant turn's `toolUse` blocks are its `tool_calls`.
//!
//! [`neutral::decide`]: crate::neutral::decide

use serde_json::{Map, Value, json};

/// The OpenAI-shaped request for `body` (already validated) sent to `model`.
pub fn to_openai(model: &str, body: &Value) -> Value {
    let mut messages = Vec::new();
    let system: Vec<&str> = blocks(body.get("system"))
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if !system.is_empty() {
        messages.push(json!({ "role": "system", "content": system.join(" ") }));
    }
    for message in blocks(body.get("messages")) {
        let content = blocks(message.get("content"));
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => messages.push(assistant(content)),
            _ => user(content, &mut messages),
        }
    }
    let mut request = Map::new();
    request.insert("model".into(), Value::from(model));
    request.insert("messages".into(), Value::Array(messages));
    if let Some(config) = body.get("toolConfig") {
        let tools: Vec<Value> = blocks(config.get("tools"))
            .iter()
            .filter_map(|tool| tool.get("toolSpec"))
            .map(|spec| {
                json!({ "type": "function", "function": {
                    "name": spec.get("name").cloned().unwrap_or(Value::Null),
                    "parameters": spec.pointer("/inputSchema/json").cloned().unwrap_or(Value::Null),
                }})
            })
            .collect();
        request.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = config.get("toolChoice").and_then(tool_choice) {
            request.insert("tool_choice".into(), choice);
        }
    }
    if let Some(directives) = body.get("mock") {
        request.insert("mock".into(), directives.clone());
    }
    Value::Object(request)
}

fn blocks(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn texts(content: &[Value]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .map(|text| json!({ "type": "text", "text": text }))
        .collect()
}

fn assistant(content: &[Value]) -> Value {
    let text: String = content
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let calls: Vec<Value> = content
        .iter()
        .filter_map(|b| b.get("toolUse"))
        .map(|tool_use| {
            json!({ "id": tool_use.get("toolUseId"), "type": "function", "function": {
                "name": tool_use.get("name"),
                "arguments": tool_use.get("input").map(Value::to_string).unwrap_or_default(),
            }})
        })
        .collect();
    let mut message = json!({ "role": "assistant", "content": text });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
        if text.is_empty() {
            message["content"] = Value::Null;
        }
    }
    message
}

fn user(content: &[Value], messages: &mut Vec<Value>) {
    for result in content.iter().filter_map(|b| b.get("toolResult")) {
        let text: Vec<String> = blocks(result.get("content"))
            .iter()
            .filter_map(|part| match (part.get("text"), part.get("json")) {
                (Some(Value::String(text)), _) => Some(text.clone()),
                (_, Some(json)) => Some(json.to_string()),
                _ => None,
            })
            .collect();
        messages.push(json!({
            "role": "tool",
            "tool_call_id": result.get("toolUseId"),
            "content": text.join(" "),
        }));
    }
    let own = texts(content);
    let has_media = content
        .iter()
        .any(|b| b.get("image").is_some() || b.get("document").is_some());
    if !own.is_empty() || has_media {
        messages.push(json!({ "role": "user", "content": own }));
    }
}

/// `{"auto":{}}` → `"auto"`, `{"any":{}}` → `"required"`, `{"tool":{"name"}}` →
/// a named function.
fn tool_choice(choice: &Value) -> Option<Value> {
    if choice.get("auto").is_some() {
        Some(json!("auto"))
    } else if choice.get("any").is_some() {
        Some(json!("required"))
    } else {
        let name = choice.pointer("/tool/name")?;
        Some(json!({ "type": "function", "function": { "name": name } }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restates_a_tool_round_trip() {
        let body = json!({
            "system": [{"text": "be"}, {"text": "brief"}],
            "messages": [
                {"role": "user", "content": [{"text": "weather?"}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "w", "input": {"c": "x"}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"t": 1}}]}}]}
            ],
            "toolConfig": {"tools": [{"toolSpec": {"name": "w", "inputSchema": {"json": {"type": "object"}}}}],
                           "toolChoice": {"any": {}}},
            "mock": {"words": 2}
        });
        let out = to_openai("m", &body);
        assert_eq!(out["messages"][0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(
            out["messages"][2]["tool_calls"][0]["function"]["arguments"],
            r#"{"c":"x"}"#
        );
        assert_eq!(out["messages"][2]["content"], Value::Null);
        assert_eq!(
            out["messages"][3],
            json!({"role": "tool", "tool_call_id": "t1", "content": "{\"t\":1}"})
        );
        assert_eq!(out["tool_choice"], "required");
        assert_eq!(out["tools"][0]["function"]["name"], "w");
        assert_eq!(out["mock"], json!({"words": 2}));
    }
}
