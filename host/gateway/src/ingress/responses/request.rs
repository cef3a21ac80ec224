//! A Responses request → a chat-completions body. `input` items become chat
//! messages (`function_call` items assistant tool calls, `function_call_output`
//! items tool messages), `instructions` a system message, function tools chat
//! tools, `text.format` a `response_format`. Anything that needs stored state
//! or OpenAI's built-in tools is refused.

use serde_json::{Map, Value, json};

use super::tools::{self, ToolNames, custom_arguments, flat_name};
use tollgate_web::error::ApiError;

/// Responses request fields that need state or hosted tools the gateway does
/// not have: refused rather than ignored.
const REFUSED: [&str; 5] = [
    "previous_response_id",
    "conversation",
    "prompt",
    "background",
    "max_tool_calls",
];

/// Responses fields dropped: no effect on a stateless answer (`store`,
/// `include`, `truncation`), nothing to send them to, or the client's own
/// telemetry (Codex's `client_metadata`, with session and installation
/// ids), which a chat-completions provider must not see.
const DROPPED: [&str; 11] = [
    "store",
    "include",
    "truncation",
    "metadata",
    "client_metadata",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "stream_options",
    "context_management",
];

/// A Responses request in chat form.
pub struct Chat {
    pub body: Map<String, Value>,
    /// How the chat tool names map back to the request's tools.
    pub names: ToolNames,
    /// What the answer's `service.warnings` says (hosted tools left out).
    pub warnings: Vec<String>,
}

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::invalid_request(message).with_param(param)
}

/// A Responses request → a chat-completions body.
#[cfg(test)]
pub fn to_chat(request: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    to_chat_form(request).map(|chat| chat.body)
}

/// A Responses request → its chat form.
pub fn to_chat_form(mut request: Map<String, Value>) -> Result<Chat, ApiError> {
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
    // The client's own conversation key (Codex sends its session id) keeps
    // the conversation where its prompt is cached; the gateway reads it as
    // `session_id`, its own field, which no upstream sees.
    let session = match request.get("prompt_cache_key") {
        Some(Value::String(key)) if !key.is_empty() => Some(key.clone()),
        _ => None,
    };
    for field in DROPPED {
        request.remove(field);
    }
    let mut chat = Map::new();
    if let Some(session) = session {
        chat.insert("session_id".into(), Value::String(session));
    }
    let model = match request.remove("model") {
        Some(Value::String(model)) if !model.is_empty() => model,
        _ => return Err(invalid("'model' is required and must be a string.", "model")),
    };
    chat.insert("model".into(), Value::String(model.clone()));
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
    let choice = request.remove("tool_choice");
    let (mut names, mut warnings) = (ToolNames::default(), Vec::new());
    if let Some(tools) = request.remove("tools") {
        let translated = tools::translate(tools, choice.as_ref(), &model)?;
        // Only hosted tools, all left out: nothing to offer the provider.
        if !translated.chat.is_empty() {
            chat.insert("tools".into(), Value::Array(translated.chat));
        }
        (names, warnings) = (translated.names, translated.warnings);
    }
    if let Some(choice) = choice
        && chat.contains_key("tools")
    {
        chat.insert("tool_choice".into(), tools::translate_choice(choice)?);
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
    Ok(Chat {
        body: chat,
        names,
        warnings,
    })
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
        "function_call" | "custom_tool_call" => {
            let name = match (
                item.get("name").and_then(Value::as_str),
                item.get("namespace").and_then(Value::as_str),
            ) {
                (Some(name), Some(namespace)) => Value::String(flat_name(namespace, name)),
                (Some(name), None) => Value::String(name.to_string()),
                (None, _) => Value::Null,
            };
            let arguments = match kind {
                "custom_tool_call" => json!(custom_arguments(
                    item.get("input").and_then(Value::as_str).unwrap_or_default()
                )),
                _ => item.get("arguments").cloned().unwrap_or_else(|| json!("{}")),
            };
            let call = json!({
                "id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            });
            if call["id"].is_null() || call["function"]["name"].is_null() {
                return Err(invalid(format!("A {kind} item needs 'call_id' and 'name'."), "input"));
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
        "function_call_output" | "custom_tool_call_output" => {
            let Some(call_id) = item.get("call_id").and_then(Value::as_str) else {
                return Err(invalid(format!("A {kind} item needs 'call_id'."), "input"));
            };
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => part_texts(parts)?,
                _ => return Err(invalid(format!("A {kind}'s 'output' must be a string."), "input")),
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
        let keyed = to_chat(
            json!({"model": "m/x", "input": "hi", "prompt_cache_key": "thread-1"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        assert_eq!(keyed["session_id"], "thread-1", "the conversation key routing reads");
        assert!(keyed.get("prompt_cache_key").is_none());
        assert!(out.get("store").is_none());
    }

    /// What Codex sends: its telemetry must not reach the provider (issue 34),
    /// its namespaced and custom tool calls come back in chat form.
    #[test]
    fn codex_requests_translate_without_client_fields() {
        let chat = to_chat_form(
            json!({
                "model": "m/x", "client_metadata": {"x-codex-installation-id": "i"}, "prompt_cache_key": "k",
                "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto"},
                "tools": [{"type": "web_search", "external_web_access": false},
                          {"type": "custom", "name": "apply_patch"}],
                "tool_choice": "auto",
                "input": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                    {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
                    {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
                    {"type": "function_call", "call_id": "c2", "namespace": "ns", "name": "f", "arguments": "{}"},
                ],
            })
            .as_object()
            .unwrap()
            .clone(),
        )
        .unwrap();
        for field in ["client_metadata", "prompt_cache_key", "include", "reasoning"] {
            assert!(chat.body.get(field).is_none(), "{field}");
        }
        let messages = chat.body["messages"].as_array().unwrap();
        assert_eq!(
            messages[1]["tool_calls"][0]["function"]["arguments"],
            r#"{"input":"*** Begin Patch"}"#
        );
        assert_eq!(
            messages[2],
            json!({"role": "tool", "tool_call_id": "c1", "content": "Done"})
        );
        assert_eq!(messages[3]["tool_calls"][0]["function"]["name"], "ns__f");
        assert_eq!(chat.body["tools"].as_array().unwrap().len(), 1);
        assert_eq!(chat.warnings.len(), 1);
        assert!(chat.names.is_custom("apply_patch"));
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
                json!({"model": "m/x", "input": "hi", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}}),
                "tool_choice",
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
