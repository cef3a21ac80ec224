//! Builds the upstream request: URL plus a Messages API body from the
//! caller's OpenAI chat-completions body.
//!
//! The body is built from scratch out of the fields Anthropic understands.
//! OpenAI fields it has no equivalent for are refused when they would change
//! the answer (`n > 1`, `logprobs`, non-zero penalties, `reasoning_effort`)
//! and dropped when they would not (`seed`, `stream_options`, `store`, …); see
//! `docs/adapters/anthropic.md`.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::{self, ResponseFormat, ToolChoice};
use tollgate_plugin_sdk::{AdapterError, CallContext};

use crate::{messages, schema};

/// `max_tokens` is required by Anthropic; sent when neither the caller nor
/// the gateway (`CallContext::max_output_tokens`) set a limit. Every Claude
/// model, old or new, accepts an output limit of 4096.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The tool that carries a JSON-mode answer: Anthropic's native structured
/// output needs a schema, so `json_object` is emulated by forcing this tool
/// and reading its input back as the message content.
pub const JSON_TOOL: &str = "json_response";

/// The upstream URL and JSON body, and what the answer translation needs.
pub struct Prepared {
    pub url: String,
    pub body: Vec<u8>,
    pub shape: Shape,
}

/// Request facts the response and stream translations depend on.
#[derive(Debug, Default, Clone)]
pub struct Shape {
    /// JSON mode is emulated with this forced tool.
    pub json_tool: Option<String>,
    /// Whitespace cut from the end of a trailing assistant turn (Anthropic
    /// rejects prefill ending in whitespace); the model repeats it at the
    /// start of its continuation, where it is cut again.
    pub trimmed_prefill: String,
}

/// Translate the caller's body for `ctx` (model, stream, output cap,
/// continuation).
pub fn prepare(ctx: &CallContext, openai_body: &[u8]) -> Result<Prepared, AdapterError> {
    let request = openai::request_object(openai_body)?;
    refuse_unsupported(&request)?;
    let model = ctx.upstream_model.as_str();
    if model.is_empty() || model.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AdapterError::invalid_request(format!(
            "'{model}' is not an Anthropic model name"
        )));
    }
    let mut conversation = messages::convert(openai::messages(&request)?)?;
    if let Some(partial) = ctx.continuation.as_deref().filter(|p| !p.is_empty()) {
        // Anthropic continues a trailing assistant turn (prefill), so the
        // caller reads one answer across a mid-stream failover.
        conversation.push_assistant_text(partial);
    }
    let trimmed_prefill = conversation.trim_prefill();
    if conversation.messages.is_empty() {
        return Err(AdapterError::invalid_request(
            "Anthropic needs at least one user or assistant message with content",
        ));
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("max_tokens".into(), json!(max_tokens(&request, ctx.max_output_tokens)?));
    if !conversation.system.is_empty() {
        body.insert("system".into(), Value::from(conversation.system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(conversation.messages));
    for key in ["temperature", "top_p"] {
        if let Some(value) = openai::number_as_sent(&request, key)? {
            body.insert(key.into(), value.clone());
        }
    }
    let stops = stop_sequences(&request)?;
    if !stops.is_empty() {
        body.insert("stop_sequences".into(), Value::from(stops));
    }
    let mut tools = tools(&request)?;
    let mut tool_choice = if tools.is_empty() { None } else { tool_choice(&request)? };
    let mut json_tool = None;
    match openai::response_format(&request)? {
        ResponseFormat::Text => {}
        ResponseFormat::JsonSchema(schema) => {
            body.insert(
                "output_config".into(),
                json!({"format": {"type": "json_schema", "schema": schema::strict(schema)}}),
            );
        }
        ResponseFormat::JsonObject => {
            if !tools.is_empty() {
                return Err(AdapterError::invalid_request(
                    "the Anthropic adapter emulates JSON mode with a forced tool, so it cannot be combined with 'tools'; use response_format json_schema",
                ));
            }
            tools.push(json!({
                "name": JSON_TOOL,
                "description": "Respond with your complete answer as one JSON object: the input of this tool is the response.",
                "input_schema": {"type": "object"},
            }));
            tool_choice = Some(json!({"type": "tool", "name": JSON_TOOL}));
            json_tool = Some(JSON_TOOL.to_owned());
        }
    }
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = tool_choice {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(user) = request.get("user").and_then(Value::as_str).filter(|u| !u.is_empty()) {
        body.insert("metadata".into(), json!({ "user_id": user }));
    }
    if ctx.stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    if let Some(directives) = openai::mock_directives(&request) {
        body.insert("mock".into(), directives.clone());
    }
    let url = format!("{}/v1/messages", ctx.base_url.trim_end_matches('/'));
    let body = serde_json::to_vec(&Value::Object(body)).map_err(|e| AdapterError::internal(e.to_string()))?;
    Ok(Prepared {
        url,
        body,
        shape: Shape {
            json_tool,
            trimmed_prefill,
        },
    })
}

/// OpenAI options that would change the answer and have no Anthropic form.
fn refuse_unsupported(request: &Map<String, Value>) -> Result<(), AdapterError> {
    openai::require_one_choice(request, "the Anthropic adapter")?;
    if request.get("logprobs").and_then(Value::as_bool) == Some(true) {
        return Err(AdapterError::invalid_request(
            "Anthropic does not return log probabilities ('logprobs')",
        ));
    }
    for key in ["presence_penalty", "frequency_penalty"] {
        if openai::number(request, key)?.is_some_and(|p| p != 0.0) {
            return Err(AdapterError::invalid_request(format!("Anthropic has no '{key}'")));
        }
    }
    if request.get("reasoning_effort").is_some_and(|v| !v.is_null()) {
        return Err(AdapterError::invalid_request(
            "'reasoning_effort' (extended thinking) is not supported by the Anthropic adapter",
        ));
    }
    let modalities = request
        .get("modalities")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    if modalities.filter_map(Value::as_str).any(|m| m != "text") {
        return Err(AdapterError::invalid_request("Anthropic only answers with text"));
    }
    Ok(())
}

/// The caller's limit, else the gateway's cap, else [`DEFAULT_MAX_TOKENS`].
fn max_tokens(request: &Map<String, Value>, cap: Option<u32>) -> Result<u64, AdapterError> {
    match openai::max_tokens(request)? {
        Some(n) if n >= 1.0 && n.fract() == 0.0 => Ok(n as u64),
        Some(_) => Err(AdapterError::invalid_request("max_tokens must be a positive integer")),
        None => Ok(u64::from(cap.unwrap_or(DEFAULT_MAX_TOKENS))),
    }
}

fn stop_sequences(request: &Map<String, Value>) -> Result<Vec<&str>, AdapterError> {
    let stops = openai::stop_sequences(request)?;
    // Anthropic rejects whitespace-only stop sequences.
    if stops.iter().any(|s| s.trim().is_empty()) {
        return Err(AdapterError::invalid_request(
            "Anthropic does not accept empty or whitespace-only stop sequences",
        ));
    }
    Ok(stops)
}

/// `tools[].function` → `{name, description, input_schema, strict}`.
fn tools(request: &Map<String, Value>) -> Result<Vec<Value>, AdapterError> {
    let tools = openai::function_tools(request, "Anthropic")?;
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.into_iter().enumerate() {
        let mut declaration = Map::new();
        declaration.insert("name".into(), Value::from(tool.name));
        if let Some(description) = tool.description {
            declaration.insert("description".into(), Value::from(description));
        }
        // `input_schema` is required and must be an object schema.
        let schema = tool.object_parameters(i)?;
        // Strict tools are Anthropic's structured outputs for tool input: the
        // schema must meet the same rules as `output_config.format`.
        if tool.strict {
            declaration.insert("input_schema".into(), schema::strict(&schema));
            declaration.insert("strict".into(), Value::Bool(true));
        } else {
            declaration.insert("input_schema".into(), schema);
        }
        out.push(Value::Object(declaration));
    }
    Ok(out)
}

/// `tool_choice` (+ `parallel_tool_calls: false`) → Anthropic `tool_choice`.
fn tool_choice(request: &Map<String, Value>) -> Result<Option<Value>, AdapterError> {
    let explicit = openai::tool_choice(request)?;
    let mut choice = match explicit.unwrap_or(ToolChoice::Auto) {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
    };
    let serial = request.get("parallel_tool_calls").and_then(Value::as_bool) == Some(false);
    if serial && choice["type"] != "none" {
        choice["disable_parallel_tool_use"] = Value::Bool(true);
    }
    Ok((explicit.is_some() || serial).then_some(choice))
}
