//! Request checks the Messages API makes before answering, with its
//! wording: a field path (`messages.1.content.0.text`) then the problem.
//! Unknown top-level fields are refused ("Extra inputs are not permitted"),
//! `model`, `max_tokens` and `messages` are required, content blocks are
//! checked per type, every `tool_use` needs its `tool_result` in the next
//! turn (and the reverse), a final assistant turn may not end in
//! whitespace, and a structured-output schema (or a strict tool's input
//! schema) must close its objects.

use serde_json::{Map, Value};

type Checked = Result<(), String>;

const REQUEST_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "messages",
    "system",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "metadata",
    "tools",
    "tool_choice",
    "output_config",
    "thinking",
    "service_tier",
    "container",
    "context_management",
    "mcp_servers",
    "cache_control",
    "inference_geo",
    "speed",
    "diagnostics",
    // The mock's own test directives (see the crate docs).
    "mock",
];
const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

/// Check a request body (already known to be an object).
pub fn request(body: &Map<String, Value>) -> Checked {
    if let Some(extra) = body.keys().find(|k| !REQUEST_FIELDS.contains(&k.as_str())) {
        return Err(format!("{extra}: Extra inputs are not permitted"));
    }
    match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        Some(_) => return Err("model: Input should be a valid string".into()),
        None => return Err("model: Field required".into()),
    }
    match body.get("max_tokens") {
        Some(n) if n.as_u64().is_some_and(|n| n >= 1) => {}
        Some(_) => return Err("max_tokens: Input should be greater than or equal to 1".into()),
        None => return Err("max_tokens: Field required".into()),
    }
    for (key, max) in [("temperature", 1.0), ("top_p", 1.0)] {
        if let Some(value) = body.get(key) {
            match value.as_f64() {
                Some(v) if (0.0..=max).contains(&v) => {}
                _ => return Err(format!("{key}: Input should be less than or equal to {max}")),
            }
        }
    }
    if let Some(stops) = body.get("stop_sequences") {
        let ok = stops
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s.as_str().is_some_and(|s| !s.trim().is_empty())));
        if !ok {
            return Err("stop_sequences: each stop sequence must contain non-whitespace".into());
        }
    }
    if let Some(stream) = body.get("stream")
        && !stream.is_boolean()
    {
        return Err("stream: Input should be a valid boolean".into());
    }
    thinking(
        body.get("thinking"),
        body.get("max_tokens").and_then(Value::as_u64).unwrap_or(0),
    )?;
    system(body.get("system"))?;
    let tools = tools(body.get("tools"))?;
    tool_choice(body.get("tool_choice"), &tools)?;
    output_config(body.get("output_config"))?;
    messages(body.get("messages"))
}

fn system(system: Option<&Value>) -> Checked {
    match system {
        None | Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (i, block) in blocks.iter().enumerate() {
                text_block(block, &format!("system.{i}"))?;
            }
            Ok(())
        }
        Some(_) => Err("system: Input should be a valid string or list of text blocks".into()),
    }
}

fn text_block(block: &Value, at: &str) -> Checked {
    if block.get("type").and_then(Value::as_str) != Some("text") {
        return Err(format!("{at}.type: Input should be 'text'"));
    }
    match block.get("text").and_then(Value::as_str) {
        Some(text) if !text.is_empty() => Ok(()),
        Some(_) => Err(format!("{at}.text: text content blocks must be non-empty")),
        None => Err(format!("{at}.text: Field required")),
    }
}

/// The names of the declared custom tools.
fn tools(tools: Option<&Value>) -> Result<Vec<String>, String> {
    let Some(tools) = tools else {
        return Ok(Vec::new());
    };
    let tools = tools.as_array().ok_or("tools: Input should be a valid list")?;
    let mut names: Vec<String> = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools.{i}");
        if let Some(kind) = tool.get("type").and_then(Value::as_str)
            && kind != "custom"
        {
            // Server tools (web_search_…, bash_…) are answered by Anthropic itself.
            return Err(format!("{at}.type: the mock does not run server tool '{kind}'"));
        }
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
        let valid = !name.is_empty()
            && name.len() <= 128
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(format!(
                "{at}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            ));
        }
        if names.iter().any(|n| n == name) {
            return Err(format!("tools: Tool names must be unique ('{name}')"));
        }
        match tool.get("input_schema") {
            Some(schema) if tool.get("strict") == Some(&Value::Bool(true)) => {
                closed_objects(schema, &format!("{at}.input_schema"))?;
            }
            Some(schema) if schema.get("type").and_then(Value::as_str) == Some("object") => {}
            Some(_) => return Err(format!("{at}.input_schema.type: Input should be 'object'")),
            None => return Err(format!("{at}.input_schema: Field required")),
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

fn tool_choice(choice: Option<&Value>, tools: &[String]) -> Checked {
    let Some(choice) = choice else {
        return Ok(());
    };
    match choice.get("type").and_then(Value::as_str) {
        Some("auto" | "any" | "none") => {}
        Some("tool") => {
            let name = choice
                .get("name")
                .and_then(Value::as_str)
                .ok_or("tool_choice.name: Field required")?;
            if !tools.iter().any(|t| t == name) {
                return Err(format!("tool_choice: tool '{name}' is not among the provided tools"));
            }
        }
        _ => return Err("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'".into()),
    }
    if choice.get("disable_parallel_tool_use").is_some_and(|d| !d.is_boolean()) {
        return Err("tool_choice.disable_parallel_tool_use: Input should be a valid boolean".into());
    }
    Ok(())
}

fn output_config(config: Option<&Value>) -> Checked {
    let Some(format) = config.and_then(|c| c.get("format")).filter(|f| !f.is_null()) else {
        return Ok(());
    };
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Err("output_config.format.type: Input should be 'json_schema'".into());
    }
    match format.get("schema") {
        Some(schema @ Value::Object(_)) => closed_objects(schema, "output_config.format.schema"),
        _ => Err("output_config.format.schema: Field required".into()),
    }
}

/// Structured outputs need `additionalProperties: false` on every object.
fn closed_objects(schema: &Value, at: &str) -> Checked {
    match schema {
        Value::Object(map) => {
            let is_object = map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties");
            if is_object && map.get("additionalProperties") != Some(&Value::Bool(false)) {
                return Err(format!(
                    "{at}: For 'object' type, 'additionalProperties' must be explicitly set to false"
                ));
            }
            for (key, value) in map {
                closed_objects(value, &format!("{at}.{key}"))?;
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| closed_objects(item, &format!("{at}.{i}"))),
        _ => Ok(()),
    }
}

fn messages(messages: Option<&Value>) -> Checked {
    let messages = match messages {
        Some(Value::Array(list)) => list,
        Some(_) => return Err("messages: Input should be a valid list".into()),
        None => return Err("messages: Field required".into()),
    };
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    // tool_use ids of the previous assistant turn, awaiting their results.
    let mut pending: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str);
        let blocks = match message.get("content") {
            Some(Value::String(text)) if !text.is_empty() || role == Some("assistant") => Vec::new(),
            Some(Value::String(_)) => return Err(format!("messages.{i}: user messages must have non-empty content")),
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => return Err(format!("messages.{i}.content: Field required")),
        };
        let mut results: Vec<String> = Vec::new();
        let mut uses: Vec<String> = Vec::new();
        for (j, block) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            match (block.get("type").and_then(Value::as_str), role) {
                (Some("text"), _) => text_block(block, &at)?,
                (Some("image"), Some("user")) => image(block, &at)?,
                (Some("document"), Some("user")) => document(block, &at)?,
                (Some("tool_result"), Some("user")) => {
                    let id = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .ok_or(format!("{at}.tool_use_id: Field required"))?;
                    if !pending.iter().any(|p| p == id) {
                        return Err(format!(
                            "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    match block.get("content") {
                        None | Some(Value::String(_)) => {}
                        Some(Value::Array(parts)) => {
                            for (k, part) in parts.iter().enumerate() {
                                if part.get("type").and_then(Value::as_str) == Some("text") {
                                    text_block(part, &format!("{at}.content.{k}"))?;
                                }
                            }
                        }
                        Some(_) => return Err(format!("{at}.content: Input should be a valid string or list")),
                    }
                    results.push(id.to_owned());
                }
                (Some("tool_use"), Some("assistant")) => {
                    let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                        return Err(format!("{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"));
                    }
                    if block.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                        return Err(format!("{at}.name: Field required"));
                    }
                    if !block.get("input").is_some_and(Value::is_object) {
                        return Err(format!("{at}.input: Input should be a valid dictionary"));
                    }
                    uses.push(id.to_owned());
                }
                (Some("thinking"), Some("assistant")) => {
                    if !block.get("signature").is_some_and(Value::is_string) {
                        return Err(format!("{at}.signature: Field required"));
                    }
                }
                (Some("redacted_thinking"), Some("assistant")) => {}
                (Some(kind), _) => return Err(format!("{at}.type: '{kind}' blocks are not allowed in this message")),
                (None, _) => return Err(format!("{at}.type: Field required")),
            }
        }
        match role {
            Some("user") => {
                let missing: Vec<&str> = pending
                    .iter()
                    .filter(|p| !results.contains(p))
                    .map(String::as_str)
                    .collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                        missing.join(", ")
                    ));
                }
            }
            Some("assistant") if !pending.is_empty() => {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    pending.join(", ")
                ));
            }
            Some("assistant") => {}
            _ => return Err(format!("messages.{i}.role: Input should be 'user' or 'assistant'")),
        }
        pending = uses;
    }
    let last = messages.last().unwrap_or(&Value::Null);
    if last.get("role").and_then(Value::as_str) == Some("assistant") {
        let tail = match last.get("content") {
            Some(Value::String(text)) => Some(text.as_str()),
            Some(Value::Array(blocks)) => blocks.last().and_then(|b| b.get("text")).and_then(Value::as_str),
            _ => None,
        };
        if tail.is_some_and(|t| t.ends_with(char::is_whitespace)) {
            return Err("messages: final assistant content cannot end with trailing whitespace".into());
        }
    }
    Ok(())
}

fn image(block: &Value, at: &str) -> Checked {
    let source = block.get("source").ok_or(format!("{at}.source: Field required"))?;
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = source.get("media_type").and_then(Value::as_str).unwrap_or("");
            if !IMAGE_TYPES.contains(&media) {
                return Err(format!(
                    "{at}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                ));
            }
            let data = source.get("data").and_then(Value::as_str).unwrap_or("");
            let base64 = !data.is_empty()
                && data
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
            if !base64 {
                return Err(format!("{at}.source.base64.data: invalid base64 data"));
            }
            Ok(())
        }
        Some("url") => match source.get("url").and_then(Value::as_str) {
            Some(url) if url.starts_with("https://") || url.starts_with("http://") => Ok(()),
            _ => Err(format!("{at}.source.url.url: Input should be a valid URL")),
        },
        _ => Err(format!("{at}.source.type: Input should be 'base64' or 'url'")),
    }
}

/// `thinking`: `{"type": "enabled", "budget_tokens": n}` with
/// 1024 ≤ n < `max_tokens`, or `{"type": "disabled"}`.
fn thinking(thinking: Option<&Value>, max_tokens: u64) -> Checked {
    let Some(thinking) = thinking else {
        return Ok(());
    };
    match thinking.get("type").and_then(Value::as_str) {
        Some("disabled") => Ok(()),
        Some("enabled") => match thinking.get("budget_tokens").and_then(Value::as_u64) {
            Some(budget) if budget < 1024 => {
                Err("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024".into())
            }
            Some(budget) if budget >= max_tokens => {
                Err("`max_tokens` must be greater than `thinking.budget_tokens`".into())
            }
            Some(_) => Ok(()),
            None => Err("thinking.enabled.budget_tokens: Field required".into()),
        },
        _ => Err("thinking.type: Input should be 'enabled' or 'disabled'".into()),
    }
}

/// A `document` block: a base64 PDF, plain text, or a URL.
fn document(block: &Value, at: &str) -> Checked {
    let source = block.get("source").ok_or(format!("{at}.source: Field required"))?;
    match source.get("type").and_then(Value::as_str) {
        Some("base64") if source.get("media_type").and_then(Value::as_str) == Some("application/pdf") => Ok(()),
        Some("base64") => Err(format!(
            "{at}.source.base64.media_type: Input should be 'application/pdf'"
        )),
        Some("text") if source.get("data").is_some_and(Value::is_string) => Ok(()),
        Some("text") => Err(format!("{at}.source.text.data: Field required")),
        Some("url") if source.get("url").is_some_and(Value::is_string) => Ok(()),
        _ => Err(format!("{at}.source.type: Input should be 'base64', 'text' or 'url'")),
    }
}
