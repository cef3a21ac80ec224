//! A Responses request checked as OpenAI checks it, and restated as a chat
//! completions request for [`crate::neutral::decide`]:
//! - `instructions` → a leading system message;
//! - message items → messages with their text (`input_text`, `output_text`
//!   and `refusal` parts joined; images count for nothing in the reply);
//! - `function_call` items → an assistant message's `tool_calls`, and
//!   `function_call_output` items → `tool` messages;
//! - flat function tools → `{"type": "function", "function": …}`;
//!   `tool_choice` `{"type": "function", "name"}` likewise;
//! - `text.format` → `response_format`.
//!
//! What OpenAI refuses is a 400 naming the parameter: a field the API does
//! not have (`messages`, `max_tokens`, `response_format`, …), an item or part
//! type it does not know, a chat-shaped tool without a top-level `name`.

use serde_json::{Map, Value, json};

pub struct Refusal {
    pub message: String,
    pub param: String,
}

/// Top-level fields of a Responses request (and the mock's directives).
const FIELDS: [&str; 27] = [
    "model",
    "input",
    "instructions",
    "stream",
    "stream_options",
    "store",
    "max_output_tokens",
    "max_tool_calls",
    "temperature",
    "top_p",
    "top_logprobs",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "reasoning",
    "user",
    "metadata",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "service_tier",
    "previous_response_id",
    "include",
    "truncation",
    "background",
    "mock",
];

fn unknown(param: &str) -> Refusal {
    Refusal {
        message: format!("Unknown parameter: '{param}'."),
        param: param.to_owned(),
    }
}

fn missing(param: String) -> Refusal {
    Refusal {
        message: format!("Missing required parameter: '{param}'."),
        param,
    }
}

fn invalid(param: String, value: &str) -> Refusal {
    Refusal {
        message: format!("Invalid value: '{value}'."),
        param,
    }
}

pub fn to_chat(request: &Map<String, Value>) -> Result<Value, Refusal> {
    if let Some(field) = request.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(unknown(field));
    }
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| missing("model".into()))?;
    let mut messages = Vec::new();
    if let Some(instructions) = request.get("instructions").and_then(Value::as_str) {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    match request.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                restate_item(item, i, &mut messages)?;
            }
        }
        _ => return Err(missing("input".into())),
    }
    let mut chat = json!({"model": model, "messages": messages});
    if let Some(Value::Array(tools)) = request.get("tools") {
        let mut out = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            if tool.get("type").and_then(Value::as_str) != Some("function") {
                return Err(invalid(
                    format!("tools[{i}].type"),
                    tool.get("type").and_then(Value::as_str).unwrap_or(""),
                ));
            }
            let name = tool
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(format!("tools[{i}].name")))?;
            let mut function = json!({"name": name});
            for key in ["description", "parameters"] {
                if let Some(value) = tool.get(key) {
                    function[key] = value.clone();
                }
            }
            out.push(json!({"type": "function", "function": function}));
        }
        if !out.is_empty() {
            chat["tools"] = Value::Array(out);
        }
    }
    match request.get("tool_choice") {
        Some(Value::String(choice)) => chat["tool_choice"] = Value::from(choice.as_str()),
        Some(choice @ Value::Object(_)) => {
            let name = choice
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| missing("tool_choice.name".into()))?;
            chat["tool_choice"] = json!({"type": "function", "function": {"name": name}});
        }
        _ => {}
    }
    if let Some(format) = request.get("text").and_then(|t| t.get("format")) {
        match format.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let name = format
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing("text.format.name".into()))?;
                let schema = format
                    .get("schema")
                    .ok_or_else(|| missing("text.format.schema".into()))?;
                chat["response_format"] =
                    json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema}});
            }
            Some("json_object") => chat["response_format"] = json!({"type": "json_object"}),
            Some("text") => {}
            other => return Err(invalid("text.format.type".into(), other.unwrap_or(""))),
        }
    }
    if let Some(directives) = request.get("mock") {
        chat["mock"] = directives.clone();
    }
    Ok(chat)
}

fn restate_item(item: &Value, i: usize, messages: &mut Vec<Value>) -> Result<(), Refusal> {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
    match kind {
        "message" => {
            let role = item
                .get("role")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(format!("input[{i}].role")))?;
            if !matches!(role, "user" | "assistant" | "system" | "developer") {
                return Err(invalid(format!("input[{i}].role"), role));
            }
            let text = match item.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => {
                    let mut text = String::new();
                    for (j, part) in parts.iter().enumerate() {
                        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                        match kind {
                            "input_text" | "output_text" => {
                                text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""))
                            }
                            "refusal" => text.push_str(part.get("refusal").and_then(Value::as_str).unwrap_or("")),
                            "input_image" | "input_file" => {}
                            other => return Err(invalid(format!("input[{i}].content[{j}].type"), other)),
                        }
                    }
                    text
                }
                _ => return Err(missing(format!("input[{i}].content"))),
            };
            let role = if role == "developer" { "system" } else { role };
            messages.push(json!({"role": role, "content": text}));
        }
        "function_call" => {
            let field = |key: &str| -> Result<&str, Refusal> {
                item.get(key)
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(format!("input[{i}].{key}")))
            };
            let call = json!({"id": field("call_id")?, "type": "function",
                              "function": {"name": field("name")?, "arguments": field("arguments")?}});
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    let calls = last.as_object_mut().expect("a message is an object");
                    match calls.get_mut("tool_calls").and_then(Value::as_array_mut) {
                        Some(list) => list.push(call),
                        None => {
                            calls.insert("tool_calls".into(), json!([call]));
                        }
                    }
                }
                _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        "function_call_output" => {
            let call_id = item
                .get("call_id")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(format!("input[{i}].call_id")))?;
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => return Err(missing(format!("input[{i}].output"))),
            };
            messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
        }
        "reasoning" | "item_reference" => {}
        other => return Err(invalid(format!("input[{i}].type"), other)),
    }
    Ok(())
}
