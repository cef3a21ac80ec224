//! OpenAI `messages` → Gemini `contents` + `systemInstruction` parts.
//!
//! - `system` / `developer` messages become `systemInstruction` parts;
//! - `user` → role `user`, with text, `inlineData` (data URLs, audio) and
//!   `fileData` (http(s)/gs URLs) parts;
//! - `assistant` → role `model`, text plus one `functionCall` part per tool call;
//! - `tool` → a `functionResponse` part in a `user` turn. Gemini matches a
//!   response to its call by function NAME, which OpenAI tool messages lack, so
//!   the name comes from the earlier assistant tool call with the same id.
//!   Consecutive tool results share one turn: Gemini wants all responses to a
//!   parallel call together.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::{AdapterError, openai};

/// The translated conversation.
#[derive(Debug, Default)]
pub struct Conversation {
    /// `systemInstruction.parts`.
    pub system: Vec<Value>,
    pub contents: Vec<Value>,
}

/// Translate the caller's `messages`.
pub fn convert(messages: &[Value]) -> Result<Conversation, AdapterError> {
    let mut out = Conversation::default();
    // (id, name) of every assistant tool call so far, searched from the end so
    // a reused id (Gemini-synthesized `call_0`, …) finds its latest call.
    let mut calls: Vec<(String, String)> = Vec::new();
    // Whether the last content holds only function responses.
    let mut in_tool_turn = false;
    for (i, message) in messages.iter().enumerate() {
        let role = openai::role(message, i)?;
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                out.system.extend(text_parts(content, i)?);
                continue;
            }
            "user" => push(&mut out.contents, "user", user_parts(content, i)?),
            "assistant" => push(&mut out.contents, "model", assistant_parts(message, i, &mut calls)?),
            "tool" | "function" => {
                let name = if role == "tool" {
                    let id = message.get("tool_call_id").and_then(Value::as_str).ok_or_else(|| {
                        AdapterError::invalid_request(format!("messages[{i}].tool_call_id is required"))
                    })?;
                    calls.iter().rev().find(|(call, _)| call == id).map(|(_, name)| name.clone()).ok_or_else(|| {
                        AdapterError::invalid_request(format!(
                            "messages[{i}]: no earlier assistant tool call has id '{id}' (Gemini needs the function name)"
                        ))
                    })?
                } else {
                    message
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| AdapterError::invalid_request(format!("messages[{i}].name is required")))?
                        .to_owned()
                };
                let part = json!({
                    "functionResponse": { "name": name, "response": tool_response(content, i)? }
                });
                match out
                    .contents
                    .last_mut()
                    .and_then(|c| c.get_mut("parts"))
                    .and_then(Value::as_array_mut)
                {
                    Some(parts) if in_tool_turn => parts.push(part),
                    _ => out.contents.push(json!({"role": "user", "parts": [part]})),
                }
                in_tool_turn = true;
                continue;
            }
            other => return Err(openai::unsupported_role(i, other, "the Gemini adapter")),
        }
        in_tool_turn = false;
    }
    Ok(out)
}

/// Appends a content unless it has no parts (Gemini rejects empty turns).
fn push(contents: &mut Vec<Value>, role: &str, parts: Vec<Value>) {
    if !parts.is_empty() {
        contents.push(json!({ "role": role, "parts": parts }));
    }
}

/// Text of a string or of the `text` parts of an array, one Gemini part each.
fn text_parts(content: &Value, i: usize) -> Result<Vec<Value>, AdapterError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(text) => Ok(text_part(text).into_iter().collect()),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for (j, part) in parts.iter().enumerate() {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") | Some("refusal") => {
                        let key = if part.get("text").is_some() { "text" } else { "refusal" };
                        out.extend(part.get(key).and_then(Value::as_str).and_then(text_part));
                    }
                    _ => {
                        return Err(AdapterError::invalid_request(format!(
                            "messages[{i}].content[{j}]: only text parts are allowed here"
                        )));
                    }
                }
            }
            Ok(out)
        }
        _ => Err(AdapterError::invalid_request(format!(
            "messages[{i}].content must be a string or an array"
        ))),
    }
}

fn text_part(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({ "text": text }))
}

/// A user message: text, images, audio and files.
fn user_parts(content: &Value, i: usize) -> Result<Vec<Value>, AdapterError> {
    let Value::Array(parts) = content else {
        return text_parts(content, i);
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = || format!("messages[{i}].content[{j}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") => out.extend(part.get("text").and_then(Value::as_str).and_then(text_part)),
            Some("image_url") => out.push(media_part(openai::image_url(part, &at())?, &at())?),
            Some("input_audio") => {
                let audio = part.get("input_audio");
                let data = audio.and_then(|a| a.get("data")).and_then(Value::as_str);
                let format = audio.and_then(|a| a.get("format")).and_then(Value::as_str);
                let (Some(data), Some(format)) = (data, format) else {
                    return Err(AdapterError::invalid_request(format!(
                        "{}.input_audio needs data and format",
                        at()
                    )));
                };
                out.push(json!({"inlineData": {"mimeType": format!("audio/{format}"), "data": data}}));
            }
            Some("file") => {
                let file = part.get("file");
                let url = file
                    .and_then(|f| f.get("file_data"))
                    .or_else(|| file.and_then(|f| f.get("file_id")))
                    .and_then(Value::as_str)
                    .ok_or_else(|| AdapterError::invalid_request(format!("{}.file needs file_data", at())))?;
                out.push(media_part(url, &at())?);
            }
            other => return Err(openai::unsupported_part(&at(), other, "the Gemini adapter")),
        }
    }
    Ok(out)
}

/// A `data:` URL → `inlineData`; an http(s), gs or Gemini file URI → `fileData`.
fn media_part(url: &str, at: &str) -> Result<Value, AdapterError> {
    if let Some((mime, data)) = openai::base64_data_url(url, at)? {
        let mime = if mime.is_empty() {
            "application/octet-stream"
        } else {
            mime
        };
        return Ok(json!({"inlineData": {"mimeType": mime, "data": data}}));
    }
    let remote = ["https://", "http://", "gs://"].iter().any(|p| url.starts_with(p));
    if !remote {
        return Err(AdapterError::invalid_request(format!(
            "{at}: expected a data: URL or an http(s)/gs URL"
        )));
    }
    let mut file = Map::new();
    if let Some(mime) = mime_from_extension(url) {
        file.insert("mimeType".into(), Value::from(mime));
    }
    file.insert("fileUri".into(), Value::from(url));
    Ok(json!({ "fileData": file }))
}

/// Gemini wants a MIME type for file URIs; guessed from the extension.
fn mime_from_extension(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "pdf" => "application/pdf",
        "mp3" => "audio/mp3",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        _ => return None,
    })
}

/// An assistant message: its text, then one `functionCall` per tool call.
fn assistant_parts(message: &Value, i: usize, calls: &mut Vec<(String, String)>) -> Result<Vec<Value>, AdapterError> {
    let mut parts = text_parts(message.get("content").unwrap_or(&Value::Null), i)?;
    let mut add_call = |j: usize, id: Option<&str>, function: &Value| -> Result<(), AdapterError> {
        let function = openai::function_call(function, &format!("messages[{i}].tool_calls[{j}]"))?;
        if let Some(id) = id {
            calls.push((id.to_owned(), function.name.to_owned()));
        }
        parts.push(json!({"functionCall": {"name": function.name, "args": function.arguments}}));
        Ok(())
    };
    if let Some(tool_calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (j, call) in tool_calls.iter().enumerate() {
            let id = call.get("id").and_then(Value::as_str);
            add_call(j, id, call.get("function").unwrap_or(&Value::Null))?;
        }
    }
    if let Some(function) = message.get("function_call").filter(|f| f.is_object()) {
        add_call(0, None, function)?;
    }
    Ok(parts)
}

/// A tool result → `functionResponse.response`, which must be an object: a
/// JSON-object result is sent as is, anything else as `{"output": text}`
/// (Gemini's documented key for a function's output).
fn tool_response(content: &Value, i: usize) -> Result<Value, AdapterError> {
    let text: String = match content {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(_) => text_parts(content, i)?
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => {
            return Err(AdapterError::invalid_request(format!(
                "messages[{i}].content must be a string or an array"
            )));
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(object @ Value::Object(_)) => Ok(object),
        _ => Ok(json!({ "output": text })),
    }
}
