//! A Messages request → a chat-completions body: `system` a system message,
//! content blocks message parts, `tool_use` assistant tool calls,
//! `tool_result` tool messages, custom tools function tools. Gateway fields
//! (`models`, `continuation`, …) and any other field Anthropic does not define
//! pass through as they would on `/v1/chat/completions`; what cannot be
//! translated is dropped (when the answer stays valid) or refused.

use serde_json::{Map, Value, json};

use tollgate_web::error::ApiError;

/// Anthropic request fields the gateway cannot serve on another protocol:
/// refused rather than silently dropped.
const REFUSED: [&str; 2] = ["container", "mcp_servers"];

/// Anthropic request fields dropped because the chat pipeline has no
/// equivalent and the answer stays valid without them.
const DROPPED: [&str; 4] = ["top_k", "thinking", "service_tier", "context_management"];

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::invalid_request(message).with_param(param)
}

/// A Messages request in chat form, and whether it carries what only a
/// provider taking Messages natively can serve.
pub struct Chat {
    pub body: Map<String, Value>,
    /// The request has `document` blocks: the chat body stands in a
    /// `[document]` text for each (enough to route and reserve by), and only
    /// a native candidate may serve it.
    pub native_only: bool,
}

/// A Messages request → a chat-completions body.
#[cfg(test)]
pub fn to_chat(request: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    to_chat_form(request).map(|chat| chat.body)
}

/// A Messages request → its chat form.
pub fn to_chat_form(mut request: Map<String, Value>) -> Result<Chat, ApiError> {
    for field in REFUSED {
        if request.contains_key(field) {
            return Err(invalid(
                format!("'{field}' is not supported by this gateway's Messages API."),
                "messages",
            ));
        }
    }
    for field in DROPPED {
        request.remove(field);
    }
    let mut chat = Map::new();
    match request.remove("model") {
        Some(Value::String(model)) if !model.is_empty() => chat.insert("model".into(), Value::String(model)),
        _ => return Err(invalid("'model' is required and must be a string.", "model")),
    };
    match request.remove("max_tokens") {
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n >= 1) => {
            chat.insert("max_tokens".into(), Value::Number(n))
        }
        _ => {
            return Err(invalid(
                "'max_tokens' is required and must be at least 1.",
                "max_tokens",
            ));
        }
    };
    let mut messages = Vec::new();
    match request.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(Value::Array(blocks)) => {
            let text = block_texts(&blocks, "system")?;
            messages.push(json!({"role": "system", "content": text}));
        }
        Some(_) => return Err(invalid("'system' must be a string or text blocks.", "system")),
    }
    let Some(Value::Array(turns)) = request.remove("messages") else {
        return Err(invalid("'messages' is required and must be an array.", "messages"));
    };
    if turns.is_empty() {
        return Err(invalid("'messages' must contain at least one message.", "messages"));
    }
    let mut native_only = false;
    for turn in turns {
        translate_turn(turn, &mut messages, &mut native_only)?;
    }
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(stop) = request.remove("stop_sequences") {
        chat.insert("stop".into(), stop);
    }
    if let Some(stream) = request.remove("stream") {
        chat.insert("stream".into(), stream);
    }
    if let Some(metadata) = request.remove("metadata")
        && let Some(user) = metadata.get("user_id").filter(|u| u.is_string())
    {
        chat.insert("user".into(), user.clone());
    }
    if let Some(tools) = request.remove("tools") {
        chat.insert("tools".into(), translate_tools(tools)?);
    }
    if let Some(choice) = request.remove("tool_choice") {
        translate_tool_choice(&choice, &mut chat)?;
    }
    if let Some(config) = request.remove("output_config")
        && let Some(format) = config.get("format").filter(|f| !f.is_null())
    {
        if format.get("type").and_then(Value::as_str) != Some("json_schema") {
            return Err(invalid(
                "'output_config.format.type' must be 'json_schema'.",
                "output_config",
            ));
        }
        let schema = format
            .get("schema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        chat.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": true}}),
        );
    }
    // temperature, top_p and every field Anthropic does not define (the
    // gateway's `models`, `continuation`, test directives) pass as they are.
    for (key, value) in request {
        chat.entry(key).or_insert(value);
    }
    Ok(Chat {
        body: chat,
        native_only,
    })
}

/// The texts of text blocks, joined by a blank line; other blocks are refused.
fn block_texts(blocks: &[Value], param: &'static str) -> Result<String, ApiError> {
    let mut texts = Vec::new();
    for block in blocks {
        match (
            block.get("type").and_then(Value::as_str),
            block.get("text").and_then(Value::as_str),
        ) {
            (Some("text"), Some(text)) => texts.push(text),
            _ => return Err(invalid(format!("'{param}' blocks must be text blocks."), param)),
        }
    }
    Ok(texts.join("\n\n"))
}

/// One Anthropic turn → chat messages. A user turn's `tool_result` blocks
/// become `tool` messages, placed first (they answer the previous assistant
/// turn's calls); an assistant turn's `tool_use` blocks become tool calls.
fn translate_turn(turn: Value, messages: &mut Vec<Value>, native_only: &mut bool) -> Result<(), ApiError> {
    let role = turn.get("role").and_then(Value::as_str).unwrap_or_default();
    let content = turn.get("content").cloned().unwrap_or(Value::Null);
    match (role, content) {
        ("user" | "assistant", Value::String(text)) => messages.push(json!({"role": role, "content": text})),
        // A system message within the conversation (Claude Code sends them,
        // beta `mid-conversation-system-…`) stays where it is, as a system turn.
        ("system", Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        ("system", Value::Array(blocks)) => {
            let text = block_texts(&blocks, "messages")?;
            messages.push(json!({"role": "system", "content": text}));
        }
        ("user", Value::Array(blocks)) => {
            let mut parts = Vec::new();
            for block in &blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_result") => messages.push(tool_result(block)?),
                    Some("text") => parts.push(json!({"type": "text", "text": text_of(block)?})),
                    Some("image") => parts.push(image_part(block)?),
                    // Only Anthropic reads documents: served natively or not at all.
                    Some("document") => {
                        *native_only = true;
                        parts.push(json!({"type": "text", "text": "[document]"}));
                    }
                    other => return Err(unsupported_block(other)),
                }
            }
            if !parts.is_empty() {
                messages.push(json!({"role": "user", "content": parts}));
            }
        }
        ("assistant", Value::Array(blocks)) => {
            let mut text = String::new();
            let mut calls = Vec::new();
            for block in &blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(text_of(block)?),
                    Some("tool_use") => calls.push(json!({
                        "id": block.get("id").cloned().unwrap_or(Value::Null),
                        "type": "function",
                        "function": {
                            "name": block.get("name").cloned().unwrap_or(Value::Null),
                            "arguments": block.get("input").unwrap_or(&json!({})).to_string(),
                        },
                    })),
                    // The reasoning of an earlier turn: nothing another provider can read.
                    Some("thinking" | "redacted_thinking") => {}
                    other => return Err(unsupported_block(other)),
                }
            }
            let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            messages.push(message);
        }
        ("user" | "assistant" | "system", _) => {
            return Err(invalid(
                "A message's 'content' must be a string or an array of blocks.",
                "messages",
            ));
        }
        _ => {
            return Err(invalid(
                "Every message's 'role' must be 'user', 'assistant' or 'system'.",
                "messages",
            ));
        }
    }
    Ok(())
}

fn text_of(block: &Value) -> Result<&str, ApiError> {
    block
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("A text block needs a string 'text'.", "messages"))
}

fn unsupported_block(kind: Option<&str>) -> ApiError {
    invalid(
        format!(
            "Content blocks of type '{}' are not supported by this gateway's Messages API.",
            kind.unwrap_or("(none)")
        ),
        "messages",
    )
}

/// A `tool_result` block → a `tool` message with its text.
fn tool_result(block: &Value) -> Result<Value, ApiError> {
    let id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("A tool_result block needs 'tool_use_id'.", "messages"))?;
    let text = match block.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => block_texts(blocks, "messages")?,
        Some(_) => {
            return Err(invalid(
                "A tool_result's 'content' must be a string or text blocks.",
                "messages",
            ));
        }
    };
    Ok(json!({"role": "tool", "tool_call_id": id, "content": text}))
}

/// An `image` block → an `image_url` part (a `data:` URL for base64 data).
fn image_part(block: &Value) -> Result<Value, ApiError> {
    let source = block.get("source").unwrap_or(&Value::Null);
    let url = match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = source.get("media_type").and_then(Value::as_str);
            let data = source.get("data").and_then(Value::as_str);
            match (media, data) {
                (Some(media), Some(data)) => format!("data:{media};base64,{data}"),
                _ => return Err(invalid("A base64 image needs 'media_type' and 'data'.", "messages")),
            }
        }
        Some("url") => match source.get("url").and_then(Value::as_str) {
            Some(url) => url.to_string(),
            None => return Err(invalid("A url image needs 'url'.", "messages")),
        },
        _ => return Err(invalid("An image's source must be 'base64' or 'url'.", "messages")),
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// Custom tools → function tools; server tools (web search, code execution,
/// …) have no equivalent on other providers and are refused.
fn translate_tools(tools: Value) -> Result<Value, ApiError> {
    let Value::Array(tools) = tools else {
        return Err(invalid("'tools' must be an array.", "tools"));
    };
    let mut out = Vec::with_capacity(tools.len());
    for tool in tools {
        match tool.get("type").and_then(Value::as_str) {
            None | Some("custom") => {}
            Some(other) => {
                return Err(invalid(
                    format!("Tools of type '{other}' are not supported by this gateway; define custom tools."),
                    "tools",
                ));
            }
        }
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            return Err(invalid("Every tool needs a 'name'.", "tools"));
        };
        let mut function = json!({
            "name": name,
            "parameters": tool.get("input_schema").cloned().unwrap_or_else(|| json!({"type": "object"})),
        });
        if let Some(description) = tool.get("description") {
            function["description"] = description.clone();
        }
        if let Some(strict) = tool.get("strict") {
            function["strict"] = strict.clone();
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok(Value::Array(out))
}

fn translate_tool_choice(choice: &Value, chat: &mut Map<String, Value>) -> Result<(), ApiError> {
    let mapped = match choice.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            Some(name) => json!({"type": "function", "function": {"name": name}}),
            None => return Err(invalid("tool_choice 'tool' needs a 'name'.", "tool_choice")),
        },
        _ => {
            return Err(invalid(
                "tool_choice.type must be auto, any, tool or none.",
                "tool_choice",
            ));
        }
    };
    chat.insert("tool_choice".into(), mapped);
    if choice.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
        chat.insert("parallel_tool_calls".into(), Value::Bool(false));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(request: Value) -> Result<Value, ApiError> {
        to_chat(request.as_object().unwrap().clone()).map(Value::Object)
    }

    #[test]
    fn translates_system_blocks_tools_and_results() {
        let out = chat(json!({
            "model": "m/x", "max_tokens": 10, "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "stop_sequences": ["END"], "temperature": 0.5, "top_k": 3, "models": ["m/y"],
            "tools": [{"name": "w", "description": "d", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t1", "name": "w", "input": {"a": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "sunny"}]}, {"type": "text", "text": "and?"}]},
            ],
        }))
        .unwrap();
        assert_eq!(out["messages"][0], json!({"role": "system", "content": "Be brief."}));
        assert_eq!(
            out["messages"][2]["tool_calls"][0]["function"]["arguments"],
            r#"{"a":1}"#
        );
        assert_eq!(
            out["messages"][3],
            json!({"role": "tool", "tool_call_id": "t1", "content": "sunny"})
        );
        assert_eq!(out["messages"][4]["content"][0]["text"], "and?");
        assert_eq!(out["tools"][0]["function"]["parameters"], json!({"type": "object"}));
        assert_eq!(out["tool_choice"], "required");
        assert_eq!(out["parallel_tool_calls"], false);
        assert_eq!(out["stop"], json!(["END"]));
        assert_eq!(out["models"], json!(["m/y"]));
        assert_eq!(out["temperature"], 0.5);
        assert!(out.get("top_k").is_none());
    }

    /// Claude Code's mid-conversation system message was a 400 (issue 34).
    #[test]
    fn system_messages_within_the_conversation_are_system_turns() {
        let out = chat(json!({"model": "m/x", "max_tokens": 5, "system": "first", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "now be terse"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "system", "content": "later"},
            {"role": "user", "content": "go"},
        ]}))
        .unwrap();
        let roles: Vec<&str> = out["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "system", "assistant", "system", "user"]);
        assert_eq!(out["messages"][2]["content"], "now be terse");
        assert_eq!(out["messages"][4]["content"], "later");
    }

    #[test]
    fn documents_make_a_request_native_only() {
        let request = json!({"model": "m/x", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}},
            {"type": "text", "text": "sum up"}]}]});
        let chat = to_chat_form(request.as_object().unwrap().clone()).unwrap();
        assert!(chat.native_only);
        assert_eq!(chat.body["messages"][0]["content"][0]["text"], "[document]");
        let plain = json!({"model": "m/x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
        assert!(!to_chat_form(plain.as_object().unwrap().clone()).unwrap().native_only);
    }

    #[test]
    fn refuses_what_it_cannot_translate() {
        for (request, param) in [
            (
                json!({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}),
                "model",
            ),
            (
                json!({"model": "m/x", "messages": [{"role": "user", "content": "x"}]}),
                "max_tokens",
            ),
            (json!({"model": "m/x", "max_tokens": 1, "messages": []}), "messages"),
            (
                json!({"model": "m/x", "max_tokens": 1, "messages": [{"role": "tool", "content": "x"}]}),
                "messages",
            ),
            (
                json!({"model": "m/x", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "video"}]}]}),
                "messages",
            ),
            (
                json!({"model": "m/x", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
                "tools",
            ),
            (
                json!({"model": "m/x", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "mcp_servers": []}),
                "messages",
            ),
        ] {
            let error = chat(request.clone()).unwrap_err();
            assert_eq!((error.status.as_u16(), error.param), (400, Some(param)), "{request}");
        }
    }
}
