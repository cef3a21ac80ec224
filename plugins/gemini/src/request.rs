//! Builds the upstream request: URL plus a Gemini `GenerateContentRequest`
//! from the caller's OpenAI chat-completions body.
//!
//! Gemini parses requests as protobuf JSON and rejects unknown fields, so the
//! body is built from scratch out of the fields it understands; OpenAI fields
//! with no Gemini equivalent are dropped (listed in `docs/adapters/gemini.md`).

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::{AdapterError, CallContext, openai};

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
    let request: Map<String, Value> = match serde_json::from_slice(openai_body) {
        Ok(Value::Object(map)) => map,
        _ => return Err(AdapterError::invalid_request("request body must be a JSON object")),
    };
    let url = url(ctx)?;
    if number(&request, "n")?.is_some_and(|n| n > 1.0) {
        return Err(AdapterError::invalid_request(
            "the Gemini adapter returns one choice per request: 'n' must be 1",
        ));
    }
    let list = match request.get("messages") {
        Some(Value::Array(list)) => list,
        _ => return Err(AdapterError::invalid_request("'messages' must be an array")),
    };
    let mut conversation = messages::convert(list)?;
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
    // The mock upstream's test directives; a real caller never sends them.
    if let Some(directives) = request.get("mock").filter(|v| v.is_object()) {
        body.insert("mock".into(), directives.clone());
    }
    let body = serde_json::to_vec(&Value::Object(body)).map_err(|e| AdapterError::internal(e.to_string()))?;
    Ok(Prepared { url, body })
}

/// `{base_url}/models/{model}:generateContent`, or
/// `:streamGenerateContent?alt=sse` when streaming. A model already named
/// `models/…` or `tunedModels/…` keeps its collection; any query on
/// `base_url` is kept.
pub fn url(ctx: &CallContext) -> Result<String, AdapterError> {
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
    let mut url = format!("{base}/{collection}/{id}:{action}");
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
    let config = match request.get("tool_choice") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(choice)) => match choice.as_str() {
            "auto" => json!({"mode": "AUTO"}),
            "none" => json!({"mode": "NONE"}),
            "required" => json!({"mode": "ANY"}),
            other => {
                return Err(AdapterError::invalid_request(format!(
                    "tool_choice '{other}' is not one of auto, none, required"
                )));
            }
        },
        Some(Value::Object(choice)) => {
            let name = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| AdapterError::invalid_request("tool_choice.function.name is required"))?;
            json!({"mode": "ANY", "allowedFunctionNames": [name]})
        }
        Some(_) => {
            return Err(AdapterError::invalid_request(
                "tool_choice must be a string or an object",
            ));
        }
    };
    Ok(Some(json!({ "functionCallingConfig": config })))
}

/// Sampling, limits, stop sequences, output format and thinking budget.
fn generation_config(request: &Map<String, Value>, cap: Option<u32>) -> Result<Map<String, Value>, AdapterError> {
    let mut config = Map::new();
    for (openai, gemini) in [
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("top_k", "topK"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
        ("seed", "seed"),
    ] {
        if let Some(value) = request.get(openai).filter(|v| !v.is_null()) {
            if !value.is_number() {
                return Err(AdapterError::invalid_request(format!("'{openai}' must be a number")));
            }
            config.insert(gemini.into(), value.clone());
        }
    }
    let limit = match number(request, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => number(request, "max_tokens")?,
    };
    match (limit, cap) {
        (Some(n), _) => {
            config.insert("maxOutputTokens".into(), json!(n as u64));
        }
        (None, Some(cap)) => {
            config.insert("maxOutputTokens".into(), json!(cap));
        }
        (None, None) => {}
    }
    let stops: Vec<Value> = match request.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![Value::from(s.as_str())],
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => list.clone(),
        Some(_) => {
            return Err(AdapterError::invalid_request(
                "'stop' must be a string or an array of strings",
            ));
        }
    };
    if !stops.is_empty() {
        config.insert("stopSequences".into(), Value::Array(stops));
    }
    response_format(request, &mut config)?;
    if let Some(budget) = thinking_budget(request)? {
        config.insert("thinkingConfig".into(), json!({ "thinkingBudget": budget }));
    }
    Ok(config)
}

/// `response_format`: JSON mode → `responseMimeType`; `json_schema` → plus
/// `responseSchema` (the schema in Gemini's subset, see `schema`).
fn response_format(request: &Map<String, Value>, config: &mut Map<String, Value>) -> Result<(), AdapterError> {
    let Some(format) = request.get("response_format").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => {}
        Some("json_object") => {
            config.insert("responseMimeType".into(), Value::from("application/json"));
        }
        Some("json_schema") => {
            let schema = format
                .get("json_schema")
                .and_then(|s| s.get("schema"))
                .filter(|s| s.is_object())
                .ok_or_else(|| AdapterError::invalid_request("response_format.json_schema.schema is required"))?;
            config.insert("responseMimeType".into(), Value::from("application/json"));
            config.insert("responseSchema".into(), schema::to_gemini(schema));
        }
        _ => {
            return Err(AdapterError::invalid_request(
                "response_format.type must be text, json_object or json_schema",
            ));
        }
    }
    Ok(())
}

/// `reasoning_effort` → `thinkingConfig.thinkingBudget` (Gemini 2.5 token
/// budgets; `minimal`/`none` turn thinking off where the model allows it).
fn thinking_budget(request: &Map<String, Value>) -> Result<Option<u32>, AdapterError> {
    let budget = match request.get("reasoning_effort") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(effort)) => match effort.as_str() {
            "none" | "minimal" => 0,
            "low" => 1024,
            "medium" => 8192,
            "high" => 24576,
            other => {
                return Err(AdapterError::invalid_request(format!(
                    "reasoning_effort '{other}' is not one of none, minimal, low, medium, high"
                )));
            }
        },
        Some(_) => return Err(AdapterError::invalid_request("'reasoning_effort' must be a string")),
    };
    Ok(Some(budget))
}

/// A numeric field, `None` when absent or null.
fn number(request: &Map<String, Value>, key: &str) -> Result<Option<f64>, AdapterError> {
    match request.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_f64()
            .map(Some)
            .ok_or_else(|| AdapterError::invalid_request(format!("'{key}' must be a number"))),
    }
}
