//! A Gemini `GenerateContentRequest` restated as an OpenAI chat-completions
//! request, for [`crate::neutral::decide`]:
//! - `systemInstruction` → one `system` message (its texts joined by a space);
//! - a `user` turn → one `tool` message per `functionResponse` part (content:
//!   the response's only string value, e.g. `{"output": "sunny"}` → `sunny`,
//!   else its JSON text), then a `user` message with its other parts;
//! - a `model` turn → an `assistant` message (texts, `functionCall`s as
//!   `tool_calls`); a trailing one is a partial answer to continue;
//! - `functionDeclarations` → function tools (schema `type` names lowercased);
//! - `toolConfig.functionCallingConfig` → `tool_choice`;
//! - `responseMimeType: application/json` → `json_object`, or `json_schema`
//!   with `responseSchema` / `responseJsonSchema`.

use serde_json::{Map, Value, json};

/// The OpenAI form of `request` for `model`.
pub fn to_openai(model: &str, request: &Map<String, Value>) -> Value {
    let mut messages = Vec::new();
    let system = texts(request.get("systemInstruction"));
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system.join(" ")}));
    }
    for content in request.get("contents").and_then(Value::as_array).into_iter().flatten() {
        let parts = content
            .get("parts")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        match content.get("role").and_then(Value::as_str) {
            Some("model") => messages.push(assistant(parts)),
            _ => user(parts, &mut messages),
        }
    }
    let mut out = json!({ "model": model, "messages": messages });
    let tools = tools(request);
    if !tools.is_empty() {
        out["tools"] = Value::Array(tools);
        if let Some(choice) = tool_choice(request) {
            out["tool_choice"] = choice;
        }
    }
    if let Some(format) = response_format(request) {
        out["response_format"] = format;
    }
    if let Some(directives) = request.get("mock") {
        out["mock"] = directives.clone();
    }
    out
}

/// The text parts of a content.
fn texts(content: Option<&Value>) -> Vec<&str> {
    content
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

fn user(parts: &[Value], messages: &mut Vec<Value>) {
    let mut rest = Vec::new();
    for part in parts {
        if let Some(response) = part.get("functionResponse") {
            messages.push(json!({
                "role": "tool",
                "tool_call_id": response.get("id").and_then(Value::as_str).unwrap_or(""),
                "content": tool_result(response.get("response").unwrap_or(&Value::Null)),
            }));
        } else if let Some(text) = part.get("text").and_then(Value::as_str) {
            rest.push(json!({"type": "text", "text": text}));
        } else {
            // Media: no words, but still part of the user turn.
            rest.push(json!({"type": "image_url", "image_url": {"url": "media"}}));
        }
    }
    if !rest.is_empty() {
        messages.push(json!({"role": "user", "content": rest}));
    }
}

/// A function response as the text a tool message would hold.
fn tool_result(response: &Value) -> String {
    match response.as_object() {
        Some(map) if map.len() == 1 => match map.values().next() {
            Some(Value::String(text)) => text.clone(),
            _ => response.to_string(),
        },
        _ => response.to_string(),
    }
}

fn assistant(parts: &[Value]) -> Value {
    let mut text = String::new();
    let mut calls = Vec::new();
    for part in parts {
        if let Some(call) = part.get("functionCall") {
            calls.push(json!({
                "id": format!("call_{}", calls.len()),
                "type": "function",
                "function": {
                    "name": call.get("name").and_then(Value::as_str).unwrap_or(""),
                    "arguments": call.get("args").map_or_else(|| "{}".to_owned(), Value::to_string),
                },
            }));
        } else if let Some(t) = part.get("text").and_then(Value::as_str)
            && part.get("thought").and_then(Value::as_bool) != Some(true)
        {
            text.push_str(t);
        }
    }
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
        if text.is_empty() {
            message["content"] = Value::Null;
        }
    }
    message
}

fn tools(request: &Map<String, Value>) -> Vec<Value> {
    let declarations = request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten();
    declarations
        .map(|d| {
            let mut function = json!({ "name": d.get("name").and_then(Value::as_str).unwrap_or("") });
            if let Some(schema) = d.get("parameters") {
                function["parameters"] = lowercase_types(schema);
            } else if let Some(schema) = d.get("parametersJsonSchema") {
                function["parameters"] = schema.clone();
            }
            json!({"type": "function", "function": function})
        })
        .collect()
}

fn tool_choice(request: &Map<String, Value>) -> Option<Value> {
    let config = request.get("toolConfig")?.get("functionCallingConfig")?;
    let mode = config.get("mode").and_then(Value::as_str).unwrap_or("AUTO");
    let named = config
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .and_then(|names| names.first())
        .and_then(Value::as_str);
    Some(match (mode, named) {
        ("NONE", _) => json!("none"),
        ("ANY" | "VALIDATED", Some(name)) => json!({"type": "function", "function": {"name": name}}),
        ("ANY", None) => json!("required"),
        _ => json!("auto"),
    })
}

fn response_format(request: &Map<String, Value>) -> Option<Value> {
    let config = request.get("generationConfig")?;
    if config.get("responseMimeType").and_then(Value::as_str) != Some("application/json") {
        return None;
    }
    let schema = match (config.get("responseSchema"), config.get("responseJsonSchema")) {
        (Some(schema), _) => lowercase_types(schema),
        (None, Some(schema)) => schema.clone(),
        (None, None) => return Some(json!({"type": "json_object"})),
    };
    Some(json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}))
}

/// Gemini `Schema` type names (`STRING`, `OBJECT`, …) as JSON Schema's
/// lowercase ones, everywhere in the schema.
fn lowercase_types(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("type", Value::String(t)) => Value::String(t.to_ascii_lowercase()),
                        _ => lowercase_types(value),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(lowercase_types).collect()),
        other => other.clone(),
    }
}
