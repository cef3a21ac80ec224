//! A Responses request → a chat-completions body. `input` items become chat
//! messages (`function_call` items assistant tool calls, `function_call_output`
//! items tool messages), `instructions` a system message, function tools chat
//! tools, `text.format` a `response_format`. Anything that needs stored state
//! or OpenAI's built-in tools is refused.

use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// Responses request fields that need state or hosted tools the gateway does
/// not have: refused rather than ignored.
const REFUSED: [&str; 5] = [
    "previous_response_id",
    "conversation",
    "prompt",
    "background",
    "max_tool_calls",
];

/// Fields dropped: no effect on a stateless answer (`store`, `include`,
/// `truncation`), or nothing to send them to.
const DROPPED: [&str; 9] = [
    "store",
    "include",
    "truncation",
    "metadata",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "stream_options",
];

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::invalid_request(message).with_param(param)
}

/// A Responses request → a chat-completions body.
pub fn to_chat(mut request: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    for field in REFUSED {
        if request
            .get(field)
            .is_some_and(|v| !v.is_null() && *v != Value::Bool(false))
        {
            let message = match field {
                "previous_response_id" | "conversation" => format!(
                    "'{field}' needs stored conversations, which this gateway does not keep: send the whole conversation in 'input'."
                ),
                _ => format!("'{field}' is not supported by this gateway's Responses API."),
            };
            return Err(invalid(message, "input"));
        }
        request.remove(field);
    }
    for field in DROPPED {
        request.remove(field);
    }
    let mut chat = Map::new();
    match request.remove("model") {
        Some(Value::String(model)) if !model.is_empty() => chat.insert("model".into(), Value::String(model)),
        _ => return Err(invalid("'model' is required and must be a string.", "model")),
    };
    let mut messages = Vec::new();
    match request.remove("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(_) => return Err(invalid("'instructions' must be a string.", "instructions")),
    }
    match request.remove("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for item in items {
                translate_item(item, &mut messages)?;
            }
        }
        _ => return Err(invalid("'input' is required: a string or an array of items.", "input")),
    }
    if !messages.iter().any(|m| m["role"] != "system") {
        return Err(invalid("'input' must hold at least one message.", "input"));
    }
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request.remove("max_output_tokens").filter(|v| !v.is_null()) {
        chat.insert("max_tokens".into(), max);
    }
    if let Some(tools) = request.remove("tools") {
        chat.insert("tools".into(), translate_tools(tools)?);
    }
    if let Some(choice) = request.remove("tool_choice") {
        chat.insert("tool_choice".into(), translate_tool_choice(choice)?);
    }
    if let Some(text) = request.remove("text")
        && let Some(format) = translate_format(&text)?
    {
        chat.insert("response_format".into(), format);
    }
    if let Some(reasoning) = request.remove("reasoning")
        && let Some(effort) = reasoning.get("effort").filter(|e| e.is_string())
    {
        chat.insert("reasoning_effort".into(), effort.clone());
    }
    // stream, temperature, top_p, parallel_tool_calls, user and every field
    // the Responses API does not define (`models`, …) pass as they are.
    for (key, value) in request {
        chat.entry(key).or_insert(value);
    }
    Ok(chat)
}

/// One input item → chat messages. Consecutive function calls join one
/// assistant message (with the assistant text before them).
fn translate_item(item: Value, messages: &mut Vec<Value>) -> Result<(), ApiError> {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
    match kind {
        "message" => {
            let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
            if !matches!(role, "user" | "assistant" | "system" | "developer") {
                return Err(invalid(
                    "A message's 'role' must be user, assistant, system or developer.",
                    "input",
                ));
            }
            let content = match item.get("content") {
                Some(Value::String(text)) => Value::String(text.clone()),
                Some(Value::Array(parts)) => content_parts(parts, role)?,
                _ => {
                    return Err(invalid(
                        "A message's 'content' must be a string or an array of parts.",
                        "input",
                    ));
                }
            };
            messages.push(json!({"role": role, "content": content}));
        }
        "function_call" => {
            let call = json!({
                "id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": item.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": item.get("arguments").cloned().unwrap_or_else(|| json!("{}")),
                },
            });
            if call["id"].is_null() || call["function"]["name"].is_null() {
                return Err(invalid("A function_call item needs 'call_id' and 'name'.", "input"));
            }
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    let calls = last.as_object_mut().expect("messages are objects");
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
            let Some(call_id) = item.get("call_id").and_then(Value::as_str) else {
                return Err(invalid("A function_call_output item needs 'call_id'.", "input"));
            };
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => part_texts(parts)?,
                _ => return Err(invalid("A function_call_output's 'output' must be a string.", "input")),
            };
            messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
        }
        // A reasoning model's earlier reasoning: nothing another call can read.
        "reasoning" => {}
        "item_reference" => {
            return Err(invalid(
                "'item_reference' items need stored responses, which this gateway does not keep.",
                "input",
            ));
        }
        other => {
            return Err(invalid(
                format!("Input items of type '{other}' are not supported by this gateway."),
                "input",
            ));
        }
    }
    Ok(())
}

/// Message content parts → chat content: text and image parts for a user,
/// the text for anyone else.
fn content_parts(parts: &[Value], role: &str) -> Result<Value, ApiError> {
    if role != "user" {
        return part_texts(parts).map(Value::String);
    }
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => {
                out.push(json!({"type": "text", "text": text_of(part)?}));
            }
            Some("input_image") => {
                let Some(url) = part.get("image_url").and_then(Value::as_str) else {
                    return Err(invalid(
                        "An input_image part needs 'image_url' (file_id needs storage).",
                        "input",
                    ));
                };
                let mut image = json!({"url": url});
                if let Some(detail) = part.get("detail") {
                    image["detail"] = detail.clone();
                }
                out.push(json!({"type": "image_url", "image_url": image}));
            }
            other => return Err(unsupported_part(other)),
        }
    }
    Ok(Value::Array(out))
}

fn part_texts(parts: &[Value]) -> Result<String, ApiError> {
    let mut text = String::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => text.push_str(text_of(part)?),
            Some("refusal") => text.push_str(part.get("refusal").and_then(Value::as_str).unwrap_or_default()),
            other => return Err(unsupported_part(other)),
        }
    }
    Ok(text)
}

fn text_of(part: &Value) -> Result<&str, ApiError> {
    part.get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("A text part needs a string 'text'.", "input"))
}

fn unsupported_part(kind: Option<&str>) -> ApiError {
    invalid(
        format!(
            "Content parts of type '{}' are not supported by this gateway.",
            kind.unwrap_or("(none)")
        ),
        "input",
    )
}

/// Function tools → chat tools; built-in tools (web search, file search,
/// code interpreter, …) run on OpenAI's side only and are refused.
fn translate_tools(tools: Value) -> Result<Value, ApiError> {
    let Value::Array(tools) = tools else {
        return Err(invalid("'tools' must be an array.", "tools"));
    };
    let mut out = Vec::with_capacity(tools.len());
    for tool in tools {
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => {}
            other => {
                return Err(invalid(
                    format!(
                        "Tools of type '{}' are built into OpenAI's service and not supported by this gateway; define function tools.",
                        other.unwrap_or("(none)")
                    ),
                    "tools",
                ));
            }
        }
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            return Err(invalid("Every function tool needs a 'name'.", "tools"));
        };
        let mut function = json!({"name": name});
        for key in ["description", "parameters", "strict"] {
            if let Some(value) = tool.get(key).filter(|v| !v.is_null()) {
                function[key] = value.clone();
            }
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok(Value::Array(out))
}

fn translate_tool_choice(choice: Value) -> Result<Value, ApiError> {
    match &choice {
        Value::String(mode) if matches!(mode.as_str(), "auto" | "none" | "required") => Ok(choice),
        Value::Object(named) if named.get("type").and_then(Value::as_str) == Some("function") => {
            match named.get("name").and_then(Value::as_str) {
                Some(name) => Ok(json!({"type": "function", "function": {"name": name}})),
                None => Err(invalid("A function tool_choice needs a 'name'.", "tool_choice")),
            }
        }
        _ => Err(invalid(
            "'tool_choice' must be auto, none, required or a function.",
            "tool_choice",
        )),
    }
}

/// `text.format` → `response_format` (`None` for plain text).
fn translate_format(text: &Value) -> Result<Option<Value>, ApiError> {
    let Some(format) = text.get("format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = json!({
                "name": format.get("name").cloned().unwrap_or_else(|| json!("output")),
                "schema": format.get("schema").cloned().unwrap_or_else(|| json!({"type": "object"})),
            });
            for key in ["strict", "description"] {
                if let Some(value) = format.get(key).filter(|v| !v.is_null()) {
                    schema[key] = value.clone();
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        _ => Err(invalid(
            "'text.format.type' must be text, json_object or json_schema.",
            "text",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(request: Value) -> Result<Value, ApiError> {
        to_chat(request.as_object().unwrap().clone()).map(Value::Object)
    }

    #[test]
    fn translates_items_tools_and_format() {
        let out = chat(json!({
            "model": "m/x", "instructions": "Be brief.", "max_output_tokens": 20, "store": true, "models": ["m/y"],
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
                {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
            ],
            "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "w"},
            "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": true}},
        }))
        .unwrap();
        let messages = out["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[0], json!({"role": "system", "content": "Be brief."}));
        assert_eq!(messages[2]["tool_calls"].as_array().unwrap().len(), 2);
        assert_eq!(
            messages[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
        );
        assert_eq!(out["tools"][0]["function"]["strict"], true);
        assert_eq!(out["tool_choice"]["function"]["name"], "w");
        assert_eq!(out["response_format"]["json_schema"]["name"], "out");
        assert_eq!(out["max_tokens"], 20);
        assert_eq!(out["models"], json!(["m/y"]));
        assert!(out.get("store").is_none());
    }

    #[test]
    fn refuses_state_and_built_in_tools() {
        for (request, param) in [
            (json!({"input": "hi"}), "model"),
            (json!({"model": "m/x"}), "input"),
            (
                json!({"model": "m/x", "input": "hi", "previous_response_id": "resp_1"}),
                "input",
            ),
            (
                json!({"model": "m/x", "input": [{"type": "item_reference", "id": "x"}]}),
                "input",
            ),
            (
                json!({"model": "m/x", "input": "hi", "tools": [{"type": "web_search"}]}),
                "tools",
            ),
            (
                json!({"model": "m/x", "input": "hi", "text": {"format": {"type": "xml"}}}),
                "text",
            ),
        ] {
            let error = chat(request.clone()).unwrap_err();
            assert_eq!((error.status.as_u16(), error.param), (400, Some(param)), "{request}");
        }
    }
}
