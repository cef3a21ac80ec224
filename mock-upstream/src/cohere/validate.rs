//! Request checks the Cohere v2 chat endpoint makes before answering: known
//! top-level fields only, required fields present, each message shaped for
//! its role, tool results answering an earlier call, and the documented
//! parameter ranges (`p` 0.01–0.99, penalties 0–1, at most 5 stop
//! sequences). A failure is the message after Cohere's `invalid request: `.

use serde_json::{Map, Value};

type Checked = Result<(), String>;

const REQUEST_FIELDS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "strict_tools",
    "documents",
    "citation_options",
    "response_format",
    "safety_mode",
    "max_tokens",
    "stop_sequences",
    "temperature",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "k",
    "p",
    "logprobs",
    "tool_choice",
    "thinking",
    "priority",
    "stream",
    // The mock's own test directives (see the crate docs).
    "mock",
];
const MAX_STOP_SEQUENCES: usize = 5;

/// Check a v2 chat request.
pub fn request(request: &Map<String, Value>) -> Checked {
    if let Some(unknown) = request.keys().find(|k| !REQUEST_FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown field: parameter '{unknown}' is not a valid field"));
    }
    match request.get("model") {
        Some(Value::String(model)) if !model.is_empty() => {}
        _ => return Err("model is required and must be a non-empty string".into()),
    }
    let messages = match request.get("messages") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        _ => return Err("messages must be a non-empty array".into()),
    };
    let mut call_ids: Vec<&str> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        self::message(message, i, &mut call_ids)?;
    }
    if let Some(tools) = request.get("tools") {
        self::tools(tools)?;
    }
    match request.get("tool_choice") {
        None | Some(Value::Null) => {}
        Some(Value::String(choice)) if choice == "REQUIRED" || choice == "NONE" => {}
        Some(other) => return Err(format!("tool_choice must be one of REQUIRED, NONE, got {other}")),
    }
    if let Some(format) = request.get("response_format") {
        response_format(format)?;
    }
    stops(request.get("stop_sequences"))?;
    range(request, "temperature", 0.0, f64::MAX)?;
    range(request, "p", 0.01, 0.99)?;
    range(request, "frequency_penalty", 0.0, 1.0)?;
    range(request, "presence_penalty", 0.0, 1.0)?;
    integer(request, "max_tokens", 1)?;
    integer(request, "k", 0)?;
    integer(request, "seed", 0)?;
    for flag in ["stream", "strict_tools", "logprobs"] {
        if request.get(flag).is_some_and(|v| !v.is_boolean() && !v.is_null()) {
            return Err(format!("{flag} must be a boolean"));
        }
    }
    if let Some(thinking) = request.get("thinking") {
        match thinking.get("type").and_then(Value::as_str) {
            Some("enabled" | "disabled") => {}
            _ => return Err("thinking.type must be one of enabled, disabled".into()),
        }
        if thinking
            .get("token_budget")
            .is_some_and(|b| b.as_u64().is_none_or(|b| b == 0))
        {
            return Err("thinking.token_budget must be a positive integer".into());
        }
    }
    Ok(())
}

fn message<'a>(message: &'a Value, i: usize, call_ids: &mut Vec<&'a str>) -> Checked {
    let at = format!("messages[{i}]");
    let content = message.get("content");
    match message.get("role").and_then(Value::as_str) {
        Some("system") => blocks(content, &at, &["text"], true),
        Some("user") => blocks(content, &at, &["text", "image_url"], true),
        Some("assistant") => {
            let calls = match message.get("tool_calls") {
                None | Some(Value::Null) => &[][..],
                Some(Value::Array(calls)) => calls.as_slice(),
                Some(_) => return Err(format!("{at}.tool_calls must be an array")),
            };
            for (j, call) in calls.iter().enumerate() {
                let id = call.get("id").and_then(Value::as_str);
                let function = call.get("function");
                let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
                let arguments = function.and_then(|f| f.get("arguments"));
                match (id, name, arguments) {
                    (Some(id), Some(_), None | Some(Value::String(_))) => call_ids.push(id),
                    _ => {
                        return Err(format!(
                            "{at}.tool_calls[{j}] needs an id, a function name and string arguments"
                        ));
                    }
                }
            }
            if calls.is_empty() && content.is_none_or(Value::is_null) {
                return Err(format!("{at}: an assistant message needs content or tool_calls"));
            }
            if content.is_some_and(|c| !c.is_null()) {
                blocks(content, &at, &["text", "thinking"], false)?;
            }
            Ok(())
        }
        Some("tool") => {
            let id = message
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{at}.tool_call_id is required"))?;
            if !call_ids.contains(&id) {
                return Err(format!(
                    "{at}: tool_call_id '{id}' does not match any tool call of an earlier assistant message"
                ));
            }
            blocks(content, &at, &["text", "document"], true)
        }
        Some(other) => Err(format!(
            "{at}.role '{other}' must be one of user, assistant, system, tool"
        )),
        None => Err(format!("{at}.role is required")),
    }
}

/// A content: a string, or an array of blocks whose `type` is in `kinds`.
fn blocks(content: Option<&Value>, at: &str, kinds: &[&str], required: bool) -> Checked {
    let list = match content {
        Some(Value::String(_)) => return Ok(()),
        Some(Value::Array(list)) => list,
        None | Some(Value::Null) if !required => return Ok(()),
        _ => return Err(format!("{at}.content must be a string or an array of content blocks")),
    };
    for (j, block) in list.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        if !kinds.contains(&kind) {
            return Err(format!(
                "{at}.content[{j}].type '{kind}' must be one of {}",
                kinds.join(", ")
            ));
        }
        let ok = match kind {
            "text" => block.get("text").is_some_and(Value::is_string),
            "thinking" => block.get("thinking").is_some_and(Value::is_string),
            "image_url" => block
                .get("image_url")
                .and_then(|u| u.get("url"))
                .and_then(Value::as_str)
                .is_some_and(|url| url.starts_with("data:") || url.starts_with("http")),
            _ => block.get(kind).is_some(),
        };
        if !ok {
            return Err(format!("{at}.content[{j}] is missing its {kind}"));
        }
    }
    Ok(())
}

fn tools(tools: &Value) -> Checked {
    let Value::Array(tools) = tools else {
        return Err("tools must be an array".into());
    };
    for (i, tool) in tools.iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(format!("tools[{i}].type must be 'function'"));
        }
        let function = tool.get("function");
        if !function.and_then(|f| f.get("name")).is_some_and(Value::is_string) {
            return Err(format!("tools[{i}].function.name is required"));
        }
        if !function.and_then(|f| f.get("parameters")).is_some_and(Value::is_object) {
            return Err(format!("tools[{i}].function.parameters must be a JSON schema object"));
        }
    }
    Ok(())
}

fn response_format(format: &Value) -> Checked {
    match format.get("type").and_then(Value::as_str) {
        Some("text") if format.get("json_schema").is_none() => Ok(()),
        Some("text") => Err("response_format.json_schema must not be set when type is 'text'".into()),
        Some("json_object") => match format.get("json_schema") {
            None | Some(Value::Object(_)) => Ok(()),
            Some(_) => Err("response_format.json_schema must be a JSON schema object".into()),
        },
        _ => Err("response_format.type must be one of text, json_object".into()),
    }
}

fn stops(stops: Option<&Value>) -> Checked {
    match stops {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
            if list.len() > MAX_STOP_SEQUENCES {
                return Err(format!("stop_sequences can contain at most {MAX_STOP_SEQUENCES} items"));
            }
            Ok(())
        }
        Some(_) => Err("stop_sequences must be an array of strings".into()),
    }
}

fn range(request: &Map<String, Value>, key: &str, min: f64, max: f64) -> Checked {
    match request.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(value) => match value.as_f64() {
            Some(n) if (min..=max).contains(&n) => Ok(()),
            Some(_) if max == f64::MAX => Err(format!("{key} must be at least {min}")),
            Some(_) => Err(format!("{key} must be between {min} and {max}")),
            None => Err(format!("{key} must be a number")),
        },
    }
}

fn integer(request: &Map<String, Value>, key: &str, min: u64) -> Checked {
    match request.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(value) => match value.as_u64() {
            Some(n) if n >= min => Ok(()),
            _ => Err(format!("{key} must be an integer of at least {min}")),
        },
    }
}
