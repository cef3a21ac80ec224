//! OpenAI `messages` → Anthropic `system` + `messages`.
//!
//! - `system` / `developer` messages are joined into the top-level `system`;
//! - `user` → a `user` turn of `text` and `image` blocks (base64 for data
//!   URLs, `url` sources for http(s) URLs);
//! - `assistant` → an `assistant` turn: text, then one `tool_use` block per
//!   tool call (`input` is the parsed arguments object);
//! - `tool` → a `tool_result` block in a `user` turn.
//!
//! Anthropic wants user and assistant turns to alternate and the
//! `tool_result` blocks of a turn to come before its other blocks, so
//! consecutive same-role messages are merged into one turn and tool results
//! are placed ahead of text. Empty text is dropped (Anthropic rejects empty
//! text blocks), and so is a turn left with no blocks.

use serde_json::{Value, json};
use tollgate_plugin_sdk::{AdapterError, openai};

/// The translated conversation.
#[derive(Debug, Default)]
pub struct Conversation {
    /// System texts, joined with a blank line into `system`.
    pub system: Vec<String>,
    pub messages: Vec<Value>,
}

impl Conversation {
    /// Appends `blocks` as a `role` turn, merged into the previous turn when
    /// it has the same role. `tool_result` blocks go ahead of the others.
    fn push(&mut self, role: &str, blocks: Vec<Value>) {
        if blocks.is_empty() {
            return;
        }
        let last = self
            .messages
            .last_mut()
            .filter(|m| m["role"] == role)
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut);
        let Some(content) = last else {
            self.messages.push(json!({ "role": role, "content": blocks }));
            return;
        };
        for block in blocks {
            if block["type"] == "tool_result" {
                let at = content.iter().take_while(|b| b["type"] == "tool_result").count();
                content.insert(at, block);
            } else {
                content.push(block);
            }
        }
    }

    /// Adds `text` to the end of the conversation as assistant text.
    pub fn push_assistant_text(&mut self, text: &str) {
        self.push("assistant", vec![json!({"type": "text", "text": text})]);
    }

    /// Cuts trailing whitespace off a final assistant text (Anthropic rejects
    /// it) and returns what was cut.
    pub fn trim_prefill(&mut self) -> String {
        let Some(last) = self.messages.last_mut().filter(|m| m["role"] == "assistant") else {
            return String::new();
        };
        let Some(blocks) = last.get_mut("content").and_then(Value::as_array_mut) else {
            return String::new();
        };
        let Some(Value::String(text)) = blocks
            .last_mut()
            .filter(|b| b["type"] == "text")
            .and_then(|b| b.get_mut("text"))
        else {
            return String::new();
        };
        let kept = text.trim_end().len();
        let cut = text.split_off(kept);
        if text.is_empty() {
            blocks.pop();
            if blocks.is_empty() {
                self.messages.pop();
            }
        }
        cut
    }
}

/// Translate the caller's `messages`.
pub fn convert(messages: &[Value]) -> Result<Conversation, AdapterError> {
    let mut out = Conversation::default();
    // Ids of every assistant tool call so far: Anthropic refuses a
    // `tool_result` whose `tool_use_id` it cannot match.
    let mut calls: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = openai::role(message, i)?;
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                let text = openai::texts(content, i)?.join("\n");
                if !text.is_empty() {
                    out.system.push(text);
                }
            }
            "user" => out.push("user", user_blocks(content, i)?),
            "assistant" => out.push("assistant", assistant_blocks(message, i, &mut calls)?),
            "tool" => {
                let id = openai::tool_result_id(message, i, &calls)?;
                let result = openai::texts(content, i)?.concat();
                out.push(
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": id, "content": result})],
                );
            }
            other => return Err(openai::unsupported_role(i, other, "the Anthropic adapter")),
        }
    }
    Ok(out)
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A user message: text and images.
fn user_blocks(content: &Value, i: usize) -> Result<Vec<Value>, AdapterError> {
    let Value::Array(parts) = content else {
        return Ok(openai::texts(content, i)?.into_iter().filter_map(text_block).collect());
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = || format!("messages[{i}].content[{j}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") => out.extend(part.get("text").and_then(Value::as_str).and_then(text_block)),
            Some("image_url") => out.push(image_block(openai::image_url(part, &at())?, &at())?),
            other => return Err(openai::unsupported_part(&at(), other, "the Anthropic adapter")),
        }
    }
    Ok(out)
}

/// The image types Anthropic accepts.
const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// A base64 `data:` URL → a `base64` source; an http(s) URL → a `url` source.
fn image_block(url: &str, at: &str) -> Result<Value, AdapterError> {
    if let Some((media_type, data)) = openai::base64_data_url(url, at)? {
        if !IMAGE_TYPES.contains(&media_type) {
            return Err(AdapterError::invalid_request(format!(
                "{at}: Anthropic accepts image/jpeg, image/png, image/gif and image/webp, not '{media_type}'"
            )));
        }
        return Ok(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }));
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(json!({"type": "image", "source": {"type": "url", "url": url}}));
    }
    Err(AdapterError::invalid_request(format!(
        "{at}: expected a base64 data: URL or an http(s) URL"
    )))
}

/// An assistant message: its text, then one `tool_use` per tool call.
fn assistant_blocks(message: &Value, i: usize, calls: &mut Vec<String>) -> Result<Vec<Value>, AdapterError> {
    let content = message.get("content").unwrap_or(&Value::Null);
    let mut blocks: Vec<Value> = openai::texts(content, i)?.into_iter().filter_map(text_block).collect();
    let tool_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for (j, call) in tool_calls.enumerate() {
        let at = format!("messages[{i}].tool_calls[{j}]");
        let id = openai::tool_call_id(call, &at)?;
        let function = openai::function_call(call.get("function").unwrap_or(&Value::Null), &at)?;
        calls.push(id.to_owned());
        blocks.push(json!({"type": "tool_use", "id": id, "name": function.name, "input": function.arguments}));
    }
    Ok(blocks)
}
