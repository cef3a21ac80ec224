//! Builds the upstream request: a Cohere v2 chat body from the caller's
//! OpenAI chat-completions body.
//!
//! Cohere rejects fields it does not know, so the body is built from scratch
//! out of the fields it understands; OpenAI fields that are only hints
//! (`user`, `store`, `metadata`, `parallel_tool_calls`, `logit_bias`,
//! `stream_options`, …) are dropped, and those whose meaning cannot be kept are
//! refused (listed in `docs/adapters/cohere.md`).

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::{self, ResponseFormat, ToolChoice};
use tollgate_plugin_sdk::{AdapterError, CallContext};

use crate::messages;

/// Cohere accepts at most this many stop sequences.
const MAX_STOP_SEQUENCES: usize = 5;
/// Cohere's range for `p` (nucleus sampling).
const P_MIN: f64 = 0.01;
const P_MAX: f64 = 0.99;

/// `{base_url}/v2/chat`; the catalog's base URL is the API root.
pub fn url(base_url: &str) -> String {
    format!("{}/v2/chat", base_url.trim_end_matches('/'))
}

/// Translate the caller's body for `ctx` (model, stream, output cap,
/// continuation).
pub fn prepare(ctx: &CallContext, openai_body: &[u8]) -> Result<Vec<u8>, AdapterError> {
    let request = openai::request_object(openai_body)?;
    if ctx.upstream_model.trim().is_empty() {
        return Err(AdapterError::invalid_request("the Cohere model name is empty"));
    }
    openai::require_one_choice(&request, "the Cohere adapter")?;
    if request.get("logprobs").and_then(Value::as_bool) == Some(true) {
        return Err(AdapterError::invalid_request(
            "the Cohere adapter does not translate logprobs: leave 'logprobs' unset",
        ));
    }
    let mut conversation = messages::convert(openai::messages(&request)?)?;
    if let Some(partial) = ctx.continuation.as_deref().filter(|p| !p.is_empty()) {
        // Cohere has no prefill: a trailing assistant turn asks it to go on
        // from the text the caller already has.
        conversation.push(json!({"role": "assistant", "content": partial}));
    }
    if !conversation.iter().any(|m| m["role"] != "system") {
        return Err(AdapterError::invalid_request(
            "Cohere needs at least one user, assistant or tool message",
        ));
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::from(ctx.upstream_model.as_str()));
    body.insert("messages".into(), Value::Array(conversation));
    tools(&request, &mut body)?;
    sampling(&request, ctx.max_output_tokens, &mut body)?;
    response_format(&request, &mut body)?;
    thinking(&request, &mut body)?;
    if ctx.stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    if let Some(directives) = openai::mock_directives(&request) {
        body.insert("mock".into(), directives.clone());
    }
    serde_json::to_vec(&Value::Object(body)).map_err(|e| AdapterError::internal(e.to_string()))
}

/// `tools` and `tool_choice`. Cohere's tools have OpenAI's shape; `strict`
/// moves to the request-wide `strict_tools`. Cohere has no named tool choice,
/// so `{"type":"function","function":{"name":…}}` is emulated by offering
/// only that tool with `REQUIRED`.
fn tools(request: &Map<String, Value>, body: &mut Map<String, Value>) -> Result<(), AdapterError> {
    let list = openai::function_tools(request, "Cohere")?;
    if list.is_empty() {
        return Ok(());
    }
    let mut tools = Vec::with_capacity(list.len());
    let mut strict = false;
    for (i, tool) in list.into_iter().enumerate() {
        if tool.name.is_empty() {
            return Err(AdapterError::invalid_request(format!(
                "tools[{i}].function.name is required"
            )));
        }
        strict |= tool.strict;
        let mut out = Map::new();
        out.insert("name".into(), Value::from(tool.name));
        if let Some(description) = tool.description {
            out.insert("description".into(), Value::from(description));
        }
        // Cohere requires `parameters`.
        out.insert("parameters".into(), tool.object_parameters(i)?);
        tools.push(json!({"type": "function", "function": out}));
    }
    let choice = match openai::tool_choice(request)? {
        None | Some(ToolChoice::Auto) => None,
        Some(ToolChoice::None) => Some("NONE"),
        Some(ToolChoice::Required) => Some("REQUIRED"),
        Some(ToolChoice::Function(name)) => {
            let position = tools
                .iter()
                .position(|t| t["function"]["name"] == name)
                .ok_or_else(|| {
                    AdapterError::invalid_request(format!("tool_choice names '{name}', which is not in 'tools'"))
                })?;
            let only = tools.swap_remove(position);
            tools = vec![only];
            Some("REQUIRED")
        }
    };
    body.insert("tools".into(), Value::Array(tools));
    if strict {
        body.insert("strict_tools".into(), Value::Bool(true));
    }
    if let Some(choice) = choice {
        body.insert("tool_choice".into(), Value::from(choice));
    }
    Ok(())
}

/// Sampling, limits and stop sequences.
fn sampling(request: &Map<String, Value>, cap: Option<u32>, body: &mut Map<String, Value>) -> Result<(), AdapterError> {
    for (key, cohere) in [
        ("temperature", "temperature"),
        ("top_p", "p"),
        ("seed", "seed"),
        ("frequency_penalty", "frequency_penalty"),
        ("presence_penalty", "presence_penalty"),
    ] {
        if let Some(value) = openai::number_as_sent(request, key)? {
            let n = value.as_f64().unwrap_or_default();
            let value = match key {
                // Cohere takes p in 0.01..=0.99; OpenAI's common top_p 1 (no
                // cut-off) is nearest to 0.99.
                "top_p" if !(P_MIN..=P_MAX).contains(&n) => json!(n.clamp(P_MIN, P_MAX)),
                "frequency_penalty" | "presence_penalty" if !(0.0..=1.0).contains(&n) => {
                    return Err(AdapterError::invalid_request(format!(
                        "Cohere takes '{key}' between 0 and 1, got {n}"
                    )));
                }
                _ => value.clone(),
            };
            body.insert(cohere.into(), value);
        }
    }
    match (openai::max_tokens(request)?, cap) {
        (Some(n), _) if n >= 1.0 => {
            body.insert("max_tokens".into(), json!(n as u64));
        }
        (Some(_), _) => return Err(AdapterError::invalid_request("'max_tokens' must be at least 1")),
        (None, Some(cap)) => {
            body.insert("max_tokens".into(), json!(cap));
        }
        (None, None) => {}
    }
    let stops = openai::stop_sequences(request)?;
    if stops.len() > MAX_STOP_SEQUENCES {
        return Err(AdapterError::invalid_request(format!(
            "Cohere accepts at most {MAX_STOP_SEQUENCES} stop sequences"
        )));
    }
    if !stops.is_empty() {
        body.insert("stop_sequences".into(), Value::from(stops));
    }
    Ok(())
}

/// `response_format`: JSON mode → `{"type":"json_object"}`; `json_schema` →
/// the same with the bare schema in `json_schema` (Cohere takes the schema
/// itself, not OpenAI's `{name, schema, strict}` wrapper).
fn response_format(request: &Map<String, Value>, body: &mut Map<String, Value>) -> Result<(), AdapterError> {
    let translated = match openai::response_format(request)? {
        ResponseFormat::Text => return Ok(()),
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema(schema) => json!({"type": "json_object", "json_schema": schema}),
    };
    body.insert("response_format".into(), translated);
    Ok(())
}

/// `reasoning_effort` → `thinking` (Cohere's reasoning models take a token
/// budget; `none`/`minimal` turn reasoning off).
fn thinking(request: &Map<String, Value>, body: &mut Map<String, Value>) -> Result<(), AdapterError> {
    let Some(effort) = openai::reasoning_effort(request)? else {
        return Ok(());
    };
    let thinking = match effort.token_budget() {
        None => json!({"type": "disabled"}),
        Some(budget) => json!({"type": "enabled", "token_budget": budget}),
    };
    body.insert("thinking".into(), thinking);
    Ok(())
}
