//! Builds the upstream request: URL plus a Gemini `GenerateContentRequest`
//! from the caller's OpenAI chat-completions body.
//!
//! Gemini parses requests as protobuf JSON and rejects unknown fields, so the
//! body is built from scratch out of the fields it understands; OpenAI fields
//! with no Gemini equivalent are dropped (listed in `docs/adapters/gemini.md`).

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::{self, ResponseFormat, ToolChoice};
use tollgate_plugin_sdk::{AdapterError, CallContext};

use crate::messages;
use crate::schema;

/// The upstream URL and JSON body.
pub struct Prepared {
    pub url: String,
    pub body: Vec<u8>,
}

/// Translate the caller's body for `ctx` (model, stream, output cap,
/// continuation).
pub fn prepare(ctx: &CallContext, openai_body: &[u8]) -> Result<Prepared, AdapterError> {
    let request = openai::request_object(openai_body)?;
    let url = url(ctx)?;
    openai::require_one_choice(&request, "the Gemini adapter")?;
    let mut conversation = messages::convert(openai::messages(&request)?)?;
    if let Some(partial) = ctx.continuation.as_deref().filter(|p| !p.is_empty()) {
        // Gemini continues a trailing `model` turn (prefill), so the caller
        // reads one answer across a mid-stream failover.
        conversation
            .contents
            .push(json!({"role": "model", "parts": [{"text": partial}]}));
    }
    if conversation.contents.is_empty() {
        return Err(AdapterError::invalid_request(
            "Gemini needs at least one user or assistant message with content",
        ));
    }

    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(conversation.contents));
    if !conversation.system.is_empty() {
        body.insert("systemInstruction".into(), json!({ "parts": conversation.system }));
    }
    let declarations = function_declarations(&request)?;
    if !declarations.is_empty() {
        if let Some(config) = tool_config(&request)? {
            body.insert("toolConfig".into(), config);
        }
        body.insert("tools".into(), json!([{ "functionDeclarations": declarations }]));
    }
    let config = generation_config(&request, ctx.max_output_tokens)?;
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    if let Some(directives) = openai::mock_directives(&request) {
        body.insert("mock".into(), directives.clone());
    }
    let body = serde_json::to_vec(&Value::Object(body)).map_err(|e| AdapterError::internal(e.to_string()))?;
    Ok(Prepared { url, body })
}

/// `{base_url}/models/{model}:generateContent`, or
/// `:streamGenerateContent?alt=sse` when streaming. A model already named
/// `models/…` or `tunedModels/…` keeps its collection; any query on
/// `base_url` is kept.
/// The model's resource path, `models/{id}` or `tunedModels/{id}`, checked.
pub fn model_path(ctx: &CallContext) -> Result<String, AdapterError> {
    let model = ctx.upstream_model.as_str();
    let (collection, id) = match model.split_once('/') {
        Some((collection @ ("models" | "tunedModels"), id)) => (collection, id),
        Some(_) => ("", ""),
        None => ("models", model),
    };
    let valid = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        return Err(AdapterError::invalid_request(format!(
            "'{model}' is not a Gemini model name (letters, digits, '-', '_', '.')"
        )));
    }
    Ok(format!("{collection}/{id}"))
}

pub fn url(ctx: &CallContext) -> Result<String, AdapterError> {
    let model = model_path(ctx)?;
    let (base, query) = ctx.base_url.split_once('?').unwrap_or((&ctx.base_url, ""));
    let base = base.trim_end_matches('/');
    let action = if ctx.stream {
        "streamGenerateContent"
    } else {
        "generateContent"
    };
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    if ctx.stream && !params.iter().any(|p| p.starts_with("alt=")) {
        // Without `alt=sse` Gemini streams one JSON array instead of SSE.
        params.insert(0, "alt=sse");
    }
    let mut url = format!("{base}/{model}:{action}");
    if !params.is_empty() {
        url.push('?');
        url.push_str(&params.join("&"));
    }
    Ok(url)
}

/// `tools[].function` → `functionDeclarations`. Only function tools exist in
/// chat completions; anything else is refused rather than silently dropped.
fn function_declarations(request: &Map<String, Value>) -> Result<Vec<Value>, AdapterError> {
    let tools = openai::function_tools(request, "Gemini")?;
    let mut declarations = Vec::with_capacity(tools.len());
    for tool in tools {
        let mut declaration = Map::new();
        declaration.insert("name".into(), Value::from(tool.name));
        if let Some(description) = tool.description {
            declaration.insert("description".into(), Value::from(description));
        }
        // Gemini rejects an OBJECT schema without properties: a function that
        // takes no arguments simply declares no parameters.
        if let Some(parameters) = tool.parameters.filter(|p| has_properties(p)) {
            declaration.insert("parameters".into(), schema::to_gemini(parameters));
        }
        declarations.push(Value::Object(declaration));
    }
    Ok(declarations)
}

fn has_properties(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
}

/// `tool_choice` → `toolConfig.functionCallingConfig`.
fn tool_config(request: &Map<String, Value>) -> Result<Option<Value>, AdapterError> {
    let config = match openai::tool_choice(request)? {
        None => return Ok(None),
        Some(ToolChoice::Auto) => json!({"mode": "AUTO"}),
        Some(ToolChoice::None) => json!({"mode": "NONE"}),
        Some(ToolChoice::Required) => json!({"mode": "ANY"}),
        Some(ToolChoice::Function(name)) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    };
    Ok(Some(json!({ "functionCallingConfig": config })))
}

/// Sampling, limits, stop sequences, output format and thinking budget
/// (`reasoning_effort` → `thinkingConfig.thinkingBudget`).
fn generation_config(request: &Map<String, Value>, cap: Option<u32>) -> Result<Map<String, Value>, AdapterError> {
    let mut config = Map::new();
    for (key, gemini) in [
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("top_k", "topK"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
        ("seed", "seed"),
    ] {
        if let Some(value) = openai::number_as_sent(request, key)? {
            config.insert(gemini.into(), value.clone());
        }
    }
    match (openai::max_tokens(request)?, cap) {
        (Some(n), _) => {
            config.insert("maxOutputTokens".into(), json!(n as u64));
        }
        (None, Some(cap)) => {
            config.insert("maxOutputTokens".into(), json!(cap));
        }
        (None, None) => {}
    }
    let stops = openai::stop_sequences(request)?;
    if !stops.is_empty() {
        config.insert("stopSequences".into(), Value::from(stops));
    }
    response_format(request, &mut config)?;
    if let Some(effort) = openai::reasoning_effort(request)? {
        // No budget (`none`, `minimal`) turns thinking off where the model allows it.
        let budget = effort.token_budget().unwrap_or(0);
        config.insert("thinkingConfig".into(), json!({ "thinkingBudget": budget }));
    }
    Ok(config)
}

/// `response_format`: JSON mode → `responseMimeType`; `json_schema` → plus
/// `responseSchema` (the schema in Gemini's subset, see `schema`).
fn response_format(request: &Map<String, Value>, config: &mut Map<String, Value>) -> Result<(), AdapterError> {
    match openai::response_format(request)? {
        ResponseFormat::Text => {}
        ResponseFormat::JsonObject => {
            config.insert("responseMimeType".into(), Value::from("application/json"));
        }
        ResponseFormat::JsonSchema(schema) => {
            config.insert("responseMimeType".into(), Value::from("application/json"));
            config.insert("responseSchema".into(), schema::to_gemini(schema));
        }
    }
    Ok(())
}
