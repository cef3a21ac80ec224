//! A chat-completions body → a Responses API body.
//!
//! - `messages` → `input` items: system, developer and user messages keep
//!   their role (text parts become `input_text`, `image_url` parts
//!   `input_image`); an assistant message becomes a message with its text and
//!   one `function_call` item per tool call; a `tool` message a
//!   `function_call_output` for its call.
//! - `tools` → flat function tools (`name`, `description`, `parameters`,
//!   `strict`); `tool_choice` → `auto`/`none`/`required` or
//!   `{"type": "function", "name"}`; `parallel_tool_calls` as sent.
//! - `response_format` → `text.format`; `reasoning_effort` → `reasoning.effort`.
//! - `max_completion_tokens` / `max_tokens` (else the gateway's limit) →
//!   `max_output_tokens`; `temperature`, `top_p`, `user`, `metadata`,
//!   `prompt_cache_key`, `safety_identifier`, `service_tier` as sent.
//! - `store: false`: the gateway keeps no conversation at OpenAI.
//!
//! Parameters the Responses API does not have (`stop`, `seed`, `logprobs`,
//! penalties, `logit_bias`, `audio`, `modalities`) are refused by name rather
//! than dropped, so a caller never gets an answer made without them.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::{self, ResponseFormat, ToolChoice};
use tollgate_plugin_sdk::{AdapterError, CallContext};

const ADAPTER: &str = "the Responses API adapter";

/// Request fields with no Responses counterpart. Each is refused when set
/// to anything but null (or, for penalties, 0).
const UNSUPPORTED: [&str; 9] = [
    "stop",
    "seed",
    "logprobs",
    "top_logprobs",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "audio",
    "modalities",
];

/// Fields passed on as the caller sent them.
const AS_SENT: [&str; 7] = [
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "user",
    "metadata",
    "prompt_cache_key",
    "safety_identifier",
];

pub fn body(ctx: &CallContext, openai_body: &[u8]) -> Result<Vec<u8>, AdapterError> {
    let request = openai::request_object(openai_body)?;
    openai::require_one_choice(&request, ADAPTER)?;
    refuse_unsupported(&request)?;
    let mut input = items(openai::messages(&request)?)?;
    if let Some(partial) = &ctx.continuation {
        input.push(json!({"role": "assistant", "content": partial}));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::from(ctx.upstream_model.as_str()));
    body.insert("input".into(), Value::Array(input));
    body.insert("stream".into(), Value::Bool(ctx.stream));
    body.insert("store".into(), Value::Bool(false));
    let limit = match openai::max_tokens(&request)? {
        Some(n) if n >= 1.0 => Some(n as u64),
        Some(_) => return Err(AdapterError::invalid_request("the output limit must be at least 1")),
        None => ctx.max_output_tokens.map(u64::from),
    };
    if let Some(limit) = limit {
        body.insert("max_output_tokens".into(), Value::from(limit));
    }
    for key in AS_SENT {
        if let Some(value) = request.get(key).filter(|v| !v.is_null()) {
            body.insert(key.into(), value.clone());
        }
    }
    if let Some(tier) = request.get("service_tier").and_then(Value::as_str) {
        body.insert("service_tier".into(), Value::from(tier));
    }
    let tools = tools(&request)?;
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = openai::tool_choice(&request)? {
        body.insert("tool_choice".into(), tool_choice(choice));
    }
    if let Some(format) = text_format(&request)? {
        body.insert("text".into(), json!({ "format": format }));
    }
    if let Some(effort) = request.get("reasoning_effort").filter(|v| !v.is_null()) {
        openai::reasoning_effort(&request)?;
        body.insert("reasoning".into(), json!({ "effort": effort }));
    }
    if let Some(directives) = openai::mock_directives(&request) {
        body.insert("mock".into(), directives.clone());
    }
    serde_json::to_vec(&body).map_err(|e| AdapterError::internal(e.to_string()))
}

fn refuse_unsupported(request: &Map<String, Value>) -> Result<(), AdapterError> {
    for key in UNSUPPORTED {
        let set = match request.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Number(n)) if key.ends_with("_penalty") => n.as_f64() != Some(0.0),
            Some(_) => true,
        };
        if set {
            return Err(AdapterError::invalid_request(format!(
                "'{key}' is not supported by OpenAI's Responses API, which serves this model"
            )));
        }
    }
    Ok(())
}

/// `messages` → `input` items.
fn items(messages: &[Value]) -> Result<Vec<Value>, AdapterError> {
    let mut input = Vec::with_capacity(messages.len());
    let mut calls: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let text = |message: &Value| -> Result<String, AdapterError> {
            Ok(openai::texts(message.get("content").unwrap_or(&Value::Null), i)?.concat())
        };
        match openai::role(message, i)? {
            role @ ("system" | "developer") => input.push(json!({"role": role, "content": text(message)?})),
            "user" => input.push(json!({"role": "user", "content": user_content(message, i)?})),
            "assistant" => {
                let said = text(message)?;
                if !said.is_empty() {
                    input.push(json!({"role": "assistant", "content": said}));
                }
                let tool_calls = match message.get("tool_calls") {
                    None | Some(Value::Null) => &[][..],
                    Some(Value::Array(list)) => list.as_slice(),
                    Some(_) => {
                        return Err(AdapterError::invalid_request(format!(
                            "messages[{i}].tool_calls must be an array"
                        )));
                    }
                };
                for (j, call) in tool_calls.iter().enumerate() {
                    let at = format!("messages[{i}].tool_calls[{j}]");
                    let id = openai::tool_call_id(call, &at)?;
                    let function = openai::function_call(call.get("function").unwrap_or(&Value::Null), &at)?;
                    calls.push(id.to_owned());
                    input.push(json!({
                        "type": "function_call",
                        "call_id": id,
                        "name": function.name,
                        "arguments": function.arguments.to_string(),
                    }));
                }
            }
            "tool" => {
                let id = openai::tool_result_id(message, i, &calls)?;
                input.push(json!({"type": "function_call_output", "call_id": id, "output": text(message)?}));
            }
            other => return Err(openai::unsupported_role(i, other, ADAPTER)),
        }
    }
    Ok(input)
}

/// A user message's content: a string as it is, parts as input parts.
fn user_content(message: &Value, i: usize) -> Result<Value, AdapterError> {
    let parts = match message.get("content") {
        Some(Value::String(text)) => return Ok(Value::from(text.as_str())),
        Some(Value::Array(parts)) => parts,
        _ => {
            return Err(AdapterError::invalid_request(format!(
                "messages[{i}].content must be a string or an array"
            )));
        }
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        let kind = part.get("type").and_then(Value::as_str);
        out.push(match kind {
            Some("text") => {
                json!({"type": "input_text", "text": part.get("text").and_then(Value::as_str).unwrap_or("")})
            }
            Some("image_url") => {
                let mut image = json!({"type": "input_image", "image_url": openai::image_url(part, &at)?});
                if let Some(detail) = part.pointer("/image_url/detail").and_then(Value::as_str) {
                    image["detail"] = Value::from(detail);
                }
                image
            }
            _ => return Err(openai::unsupported_part(&at, kind, ADAPTER)),
        });
    }
    Ok(Value::Array(out))
}

fn tools(request: &Map<String, Value>) -> Result<Vec<Value>, AdapterError> {
    let mut out = Vec::new();
    for (i, tool) in openai::function_tools(request, "OpenAI's Responses API")?
        .iter()
        .enumerate()
    {
        let mut function = json!({
            "type": "function",
            "name": tool.name,
            "parameters": tool.object_parameters(i)?,
            "strict": tool.strict,
        });
        if let Some(description) = tool.description {
            function["description"] = Value::from(description);
        }
        out.push(function);
    }
    Ok(out)
}

fn tool_choice(choice: ToolChoice<'_>) -> Value {
    match choice {
        ToolChoice::Auto => Value::from("auto"),
        ToolChoice::None => Value::from("none"),
        ToolChoice::Required => Value::from("required"),
        ToolChoice::Function(name) => json!({"type": "function", "name": name}),
    }
}

/// `response_format` → `text.format`; `None` for plain text.
fn text_format(request: &Map<String, Value>) -> Result<Option<Value>, AdapterError> {
    Ok(match openai::response_format(request)? {
        ResponseFormat::Text => None,
        ResponseFormat::JsonObject => Some(json!({"type": "json_object"})),
        ResponseFormat::JsonSchema(schema) => {
            let spec = request.get("response_format").and_then(|f| f.get("json_schema"));
            let field = |key: &str| spec.and_then(|s| s.get(key)).filter(|v| !v.is_null()).cloned();
            let mut format = json!({
                "type": "json_schema",
                "name": field("name").unwrap_or_else(|| Value::from("response")),
                "schema": schema,
            });
            for key in ["strict", "description"] {
                if let Some(value) = field(key) {
                    format[key] = value;
                }
            }
            Some(format)
        }
    })
}
