//! OpenAI `messages` → Converse `system` blocks and `messages`.
//!
//! Converse wants a conversation of alternating `user` / `assistant` turns made
//! of content blocks; system prompts go in a separate `system` list and tool
//! results are `toolResult` blocks in a user turn. OpenAI allows consecutive
//! messages of one role and a `tool` role, so consecutive turns of one Converse
//! role are merged (tool results first, then the user's text, as Bedrock's
//! Anthropic models require).

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tollgate_plugin_sdk::AdapterError;

use crate::converse::{Block, Image, ImageSource, Text, ToolResult, ToolUse, Turn, raw};

/// The translated conversation.
#[derive(Debug, Default)]
pub struct Conversation {
    /// `system` content blocks, in order.
    pub system: Vec<Text>,
    /// Converse messages, roles alternating.
    pub messages: Vec<Turn>,
    /// Tool names the history calls (`toolUse` blocks); Bedrock needs every one
    /// declared in `toolConfig`.
    pub tools_used: Vec<String>,
    /// Whether any `toolUse` or `toolResult` block was written: Bedrock then
    /// requires a `toolConfig`.
    pub has_tool_blocks: bool,
}

impl Conversation {
    /// Appends `blocks` as a `role` turn, merged into the previous turn when it
    /// has the same role. Empty `blocks` add nothing.
    pub fn push_turn(&mut self, role: &'static str, blocks: Vec<Block>) {
        if blocks.is_empty() {
            return;
        }
        match self.messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => self.messages.push(Turn { role, content: blocks }),
        }
    }
}

/// Translates the caller's `messages` array.
pub fn convert(messages: &[Value]) -> Result<Conversation, AdapterError> {
    let mut out = Conversation::default();
    for (index, message) in messages.iter().enumerate() {
        let at = |what: &str| AdapterError::invalid_request(format!("messages[{index}]: {what}"));
        let Some(message) = message.as_object() else {
            return Err(at("must be an object"));
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                let text = joined_text(content).map_err(|e| at(&e))?;
                if !text.trim().is_empty() {
                    out.system.push(Text { text });
                }
            }
            "user" => {
                let blocks = user_blocks(content).map_err(|e| at(&e))?;
                if blocks.is_empty() {
                    return Err(at("Bedrock needs non-empty user content"));
                }
                out.push_turn("user", blocks);
            }
            "assistant" => {
                let blocks = assistant_blocks(message, &mut out).map_err(|e| at(&e))?;
                out.push_turn("assistant", blocks);
            }
            "tool" => {
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .ok_or_else(|| at("a tool message needs 'tool_call_id'"))?;
                let text = joined_text(content).map_err(|e| at(&e))?;
                out.has_tool_blocks = true;
                let block = Block::ToolResult(ToolResult {
                    tool_use_id: id.to_owned(),
                    content: vec![Text { text }],
                });
                out.push_turn("user", vec![block]);
            }
            "function" => return Err(at("role 'function' is not supported; use tools and role 'tool'")),
            other => return Err(at(&format!("unknown role '{other}'"))),
        }
    }
    Ok(out)
}

/// A string, or the `text` parts of an array joined without separator (the
/// parts of one message are one text to the caller). `null` is empty.
fn joined_text(content: &Value) -> Result<String, String> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                match part_type(part) {
                    "text" => text.push_str(part_text(part)?),
                    other => return Err(format!("content part type '{other}' is not allowed here")),
                }
            }
            Ok(text)
        }
        _ => Err("'content' must be a string or an array of parts".into()),
    }
}

fn part_type(part: &Value) -> &str {
    part.get("type").and_then(Value::as_str).unwrap_or("text")
}

fn part_text(part: &Value) -> Result<&str, String> {
    part.get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| "a text part needs a string 'text'".to_owned())
}

/// User content: text blocks (blank ones dropped: Bedrock rejects them) and
/// images.
fn user_blocks(content: &Value) -> Result<Vec<Block>, String> {
    match content {
        Value::String(text) => Ok(text_block(text).into_iter().collect()),
        Value::Array(parts) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for part in parts {
                match part_type(part) {
                    "text" => blocks.extend(text_block(part_text(part)?)),
                    "image_url" => blocks.push(image_block(part)?),
                    other => {
                        return Err(format!(
                            "content part type '{other}' is not supported by Bedrock's adapter"
                        ));
                    }
                }
            }
            Ok(blocks)
        }
        Value::Null => Ok(Vec::new()),
        _ => Err("'content' must be a string or an array of parts".into()),
    }
}

fn text_block(text: &str) -> Option<Block> {
    (!text.trim().is_empty()).then(|| Block::Text(text.to_owned()))
}

/// `{"type":"image_url","image_url":{"url":"data:image/png;base64,…"}}` →
/// `{"image":{"format":"png","source":{"bytes":"…"}}}`. Converse's JSON wire
/// form of a blob is base64, so the data is passed through undecoded.
fn image_block(part: &Value) -> Result<Block, String> {
    let url = part
        .get("image_url")
        .and_then(|i| i.get("url").or(Some(i)))
        .and_then(Value::as_str)
        .ok_or("an image_url part needs 'image_url.url'")?;
    let Some(rest) = url.strip_prefix("data:") else {
        return Err(
            "Bedrock accepts only inline images: send image_url.url as a base64 data URL \
             (data:image/png;base64,...); http(s) image URLs are not fetched"
                .into(),
        );
    };
    let (media_type, data) = rest
        .split_once(";base64,")
        .ok_or("an image data URL must be base64-encoded (data:image/<format>;base64,...)")?;
    let format = match media_type.to_ascii_lowercase().as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        other => {
            return Err(format!(
                "image type '{other}' is not supported by Bedrock (png, jpeg, gif, webp)"
            ));
        }
    };
    if data.is_empty() {
        return Err("the image data URL holds no data".into());
    }
    Ok(Block::Image(Image {
        format,
        source: ImageSource { bytes: data.to_owned() },
    }))
}

/// Assistant content: text (and refusal) parts, then one `toolUse` block per
/// tool call, whose `arguments` JSON text becomes the `input` document.
fn assistant_blocks(message: &Map<String, Value>, out: &mut Conversation) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    match message.get("content").unwrap_or(&Value::Null) {
        Value::Null => {}
        Value::String(text) => blocks.extend(text_block(text)),
        Value::Array(parts) => {
            for part in parts {
                let text = match part_type(part) {
                    "text" => part_text(part)?,
                    "refusal" => part.get("refusal").and_then(Value::as_str).unwrap_or_default(),
                    other => return Err(format!("assistant content part type '{other}' is not supported")),
                };
                blocks.extend(text_block(text));
            }
        }
        _ => return Err("'content' must be a string or an array of parts".into()),
    }
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(calls)) => calls.as_slice(),
        Some(_) => return Err("'tool_calls' must be an array".into()),
    };
    for call in calls {
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .ok_or("a tool call needs an 'id'")?;
        let function = call.get("function").ok_or("a tool call needs a 'function'")?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a tool call needs 'function.name'")?;
        let arguments = function.get("arguments").and_then(Value::as_str).unwrap_or_default();
        // Kept as written: the model sees its own earlier call unchanged.
        let input = match arguments.trim() {
            "" => raw("{}"),
            text => RawValue::from_string(text.to_owned())
                .map_err(|_| format!("the arguments of tool call '{id}' are not valid JSON"))?,
        };
        if !out.tools_used.iter().any(|n| n == name) {
            out.tools_used.push(name.to_owned());
        }
        out.has_tool_blocks = true;
        blocks.push(Block::ToolUse(ToolUse {
            tool_use_id: id.to_owned(),
            name: name.to_owned(),
            input,
        }));
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn to_json<T: serde::Serialize>(value: &T) -> Value {
        serde_json::to_value(value).unwrap()
    }

    fn convert_json(messages: Value) -> Result<Conversation, AdapterError> {
        convert(messages.as_array().unwrap())
    }

    #[test]
    fn merges_consecutive_turns_and_tool_results() {
        let c = convert_json(json!([
            {"role": "system", "content": "a"},
            {"role": "developer", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": "q1"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
                {"id": "t2", "type": "function", "function": {"name": "g", "arguments": ""}}
            ]},
            {"role": "tool", "tool_call_id": "t1", "content": "r1"},
            {"role": "tool", "tool_call_id": "t2", "content": [{"type": "text", "text": "r2"}]},
            {"role": "user", "content": "thanks"}
        ]))
        .unwrap();
        assert_eq!(to_json(&c.system), json!([{"text": "a"}, {"text": "b"}]));
        let messages = to_json(&c.messages);
        assert_eq!(messages.as_array().unwrap().len(), 3);
        assert_eq!(messages[0]["content"], json!([{"text": "q1"}, {"text": "q2"}]));
        assert_eq!(
            messages[1]["content"][1],
            json!({"toolUse": {"toolUseId": "t2", "name": "g", "input": {}}})
        );
        assert_eq!(messages[2]["content"].as_array().unwrap().len(), 3);
        assert_eq!(messages[2]["content"][2], json!({"text": "thanks"}));
        assert_eq!(c.tools_used, ["f", "g"]);
        assert!(c.has_tool_blocks);
    }

    #[test]
    fn images_must_be_inline() {
        let ok = convert_json(json!([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/jpg;base64,AAAA"}}
        ]}]))
        .unwrap();
        assert_eq!(
            to_json(&ok.messages)[0]["content"][0],
            json!({"image": {"format": "jpeg", "source": {"bytes": "AAAA"}}})
        );
        for url in [
            "https://x/cat.png",
            "data:image/png,raw",
            "data:image/tiff;base64,AA",
            "data:image/png;base64,",
        ] {
            let err = convert_json(json!([{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}}
            ]}]))
            .unwrap_err();
            assert_eq!(err.class, tollgate_plugin_sdk::ErrorClass::InvalidRequest, "{url}");
        }
    }

    #[test]
    fn rejects_what_converse_cannot_say() {
        for messages in [
            json!([{"role": "user", "content": ""}]),
            json!([{"role": "function", "content": "x", "name": "f"}]),
            json!([{"role": "tool", "content": "x"}]),
            json!([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]),
            json!([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}]),
            json!(["hi"]),
        ] {
            assert!(convert_json(messages.clone()).is_err(), "{messages}");
        }
    }

    #[test]
    fn blank_assistant_turns_are_dropped() {
        let c = convert_json(json!([
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "b"}
        ]))
        .unwrap();
        assert_eq!(
            to_json(&c.messages),
            json!([{"role": "user", "content": [{"text": "a"}, {"text": "b"}]}])
        );
    }
}
