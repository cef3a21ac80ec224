//! The checks Bedrock makes on a Converse request before any model runs, with
//! its messages: conversation shape (starts with a user turn, roles
//! alternate, no empty content or blank text), content blocks, tool results
//! answering the previous turn's tool uses, `toolConfig` required by tool
//! blocks, `inferenceConfig` ranges and `toolChoice` naming a declared tool.

use serde_json::Value;

const STARTS_WITH_USER: &str =
    "A conversation must start with a user message. Try again with a conversation that starts with a user message.";
const ALTERNATES: &str = "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.";
const NEEDS_TOOL_CONFIG: &str =
    "The toolConfig field must be defined when using toolUse and toolResult content blocks.";

/// `Err(message)` for a request Bedrock answers with a ValidationException.
pub fn converse(body: &Value) -> Result<(), String> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if messages.is_empty() {
        return Err(STARTS_WITH_USER.into());
    }
    let mut uses_tools = false;
    let mut previous_tool_uses: Vec<&str> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role != "user" && role != "assistant" {
            return Err(format!(
                "1 validation error detected: Value '{role}' at 'messages.{}.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]",
                i + 1
            ));
        }
        if i == 0 && role != "user" {
            return Err(STARTS_WITH_USER.into());
        }
        if i > 0 && messages[i - 1].get("role").and_then(Value::as_str) == Some(role) {
            return Err(ALTERNATES.into());
        }
        let content = message
            .get("content")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        if content.is_empty() {
            return Err(format!(
                "The content field in the Message object at messages.{i} is empty. Add a ContentBlock object to the content field and try again."
            ));
        }
        let mut tool_uses = Vec::new();
        let mut tool_results = Vec::new();
        for (j, block) in content.iter().enumerate() {
            check_block(block, &format!("messages.{i}.content.{j}"))?;
            if let Some(id) = block.pointer("/toolUse/toolUseId").and_then(Value::as_str) {
                tool_uses.push(id);
            }
            if let Some(id) = block.pointer("/toolResult/toolUseId").and_then(Value::as_str) {
                tool_results.push(id);
            }
        }
        uses_tools |= !tool_uses.is_empty() || !tool_results.is_empty();
        if role == "user" {
            if tool_results.iter().any(|id| !previous_tool_uses.contains(id)) {
                return Err(format!(
                    "The number of toolResult blocks at messages.{i}.content exceeds the number of toolUse blocks of previous turn."
                ));
            }
            let missing: Vec<&str> = previous_tool_uses
                .iter()
                .copied()
                .filter(|id| !tool_results.contains(id))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "Expected toolResult blocks at messages.{i}.content for the following Ids: {}",
                    missing.join(", ")
                ));
            }
        }
        previous_tool_uses = tool_uses;
    }
    for (i, block) in body
        .get("system")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if block
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| t.trim().is_empty())
        {
            return Err(format!(
                "The text field in the SystemContentBlock object at system.{i} is blank. Add text to the text field, and try again."
            ));
        }
    }
    check_inference_config(body.get("inferenceConfig"))?;
    match body.get("toolConfig") {
        Some(config) => check_tool_config(config),
        None if uses_tools => Err(NEEDS_TOOL_CONFIG.into()),
        None => Ok(()),
    }
}

fn check_block(block: &Value, at: &str) -> Result<(), String> {
    let Some(members) = block.as_object().filter(|m| m.len() == 1) else {
        return Err(format!(
            "The ContentBlock object at {at} must set exactly one of its union members."
        ));
    };
    if let Some(text) = members.get("text") {
        if text.as_str().is_none_or(|t| t.trim().is_empty()) {
            return Err(format!(
                "The text field in the ContentBlock object at {at} is blank. Add text to the text field, and try again."
            ));
        }
    } else if let Some(image) = members.get("image") {
        let format = image.get("format").and_then(Value::as_str).unwrap_or_default();
        if !matches!(format, "png" | "jpeg" | "gif" | "webp") {
            return Err(format!(
                "1 validation error detected: Value '{format}' at '{at}.member.image.format' failed to satisfy constraint: Member must satisfy enum value set: [png, jpeg, gif, webp]"
            ));
        }
        let bytes = image
            .pointer("/source/bytes")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !is_base64(bytes) {
            return Err(format!("Invalid base64 image data at {at}.image.source.bytes."));
        }
    } else if let Some(tool_use) = members.get("toolUse") {
        for field in ["toolUseId", "name", "input"] {
            if tool_use.get(field).is_none() {
                return Err(format!(
                    "The toolUse block at {at} is missing the required field '{field}'."
                ));
            }
        }
    } else if let Some(result) = members.get("toolResult")
        && (result.get("toolUseId").and_then(Value::as_str).is_none() || !result["content"].is_array())
    {
        return Err(format!(
            "The toolResult block at {at} needs a toolUseId and a content list."
        ));
    }
    Ok(())
}

/// Non-empty standard base64 with padding, as the JSON form of a blob.
fn is_base64(text: &str) -> bool {
    !text.is_empty()
        && text.len().is_multiple_of(4)
        && text.trim_end_matches('=').len() + 2 >= text.len()
        && text
            .trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

fn check_inference_config(config: Option<&Value>) -> Result<(), String> {
    let Some(config) = config else {
        return Ok(());
    };
    let constraint = |field: &str, value: &Value, rule: &str| {
        format!(
            "1 validation error detected: Value '{value}' at 'inferenceConfig.{field}' failed to satisfy constraint: {rule}"
        )
    };
    if let Some(max) = config.get("maxTokens")
        && max.as_u64().is_none_or(|n| n < 1)
    {
        return Err(constraint(
            "maxTokens",
            max,
            "Member must have value greater than or equal to 1",
        ));
    }
    for field in ["temperature", "topP"] {
        if let Some(value) = config.get(field)
            && value.as_f64().is_none_or(|v| !(0.0..=1.0).contains(&v))
        {
            return Err(constraint(field, value, "Member must have value between 0 and 1"));
        }
    }
    if let Some(stops) = config.get("stopSequences")
        && !stops.as_array().is_some_and(|s| s.iter().all(Value::is_string))
    {
        return Err(constraint("stopSequences", stops, "Member must be a list of strings"));
    }
    Ok(())
}

fn check_tool_config(config: &Value) -> Result<(), String> {
    let tools = config
        .get("tools")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if tools.is_empty() {
        return Err(
            "1 validation error detected: Value '[]' at 'toolConfig.tools' failed to satisfy constraint: Member must have length greater than or equal to 1"
                .into(),
        );
    }
    let mut names = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let Some(spec) = tool.get("toolSpec") else {
            continue;
        };
        let name = spec.get("name").and_then(Value::as_str).unwrap_or_default();
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(format!(
                "1 validation error detected: Value '{name}' at 'toolConfig.tools.{}.member.toolSpec.name' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+",
                i + 1
            ));
        }
        if !spec.pointer("/inputSchema/json").is_some_and(Value::is_object) {
            return Err(format!(
                "The inputSchema of tool '{name}' must be a JSON schema object."
            ));
        }
        names.push(name);
    }
    if let Some(choice) = config.get("toolChoice") {
        let members = choice.as_object().map_or(0, |m| m.len());
        if members != 1 || !["auto", "any", "tool"].iter().any(|k| choice.get(k).is_some()) {
            return Err("toolChoice must set exactly one of auto, any or tool.".into());
        }
        if let Some(tool) = choice.get("tool") {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            if !names.contains(&name) {
                return Err(format!(
                    "The tool '{name}' in toolChoice is not defined in toolConfig.tools."
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": [{"text": text}]})
    }

    #[test]
    fn conversation_shape() {
        assert!(converse(&json!({"messages": [user("hi")]})).is_ok());
        assert_eq!(converse(&json!({})).unwrap_err(), STARTS_WITH_USER);
        assert_eq!(
            converse(&json!({"messages": [{"role": "assistant", "content": [{"text": "x"}]}]})).unwrap_err(),
            STARTS_WITH_USER
        );
        assert_eq!(
            converse(&json!({"messages": [user("a"), user("b")]})).unwrap_err(),
            ALTERNATES
        );
        assert!(
            converse(&json!({"messages": [user(" ")]}))
                .unwrap_err()
                .contains("is blank")
        );
        assert!(
            converse(&json!({"messages": [{"role": "user", "content": []}]}))
                .unwrap_err()
                .contains("is empty")
        );
        assert!(converse(&json!({"messages": [{"role": "system", "content": [{"text": "x"}]}]})).is_err());
    }

    #[test]
    fn tool_blocks_need_config_and_matching_results() {
        let tool_use =
            json!({"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "w", "input": {}}}]});
        let result = |id: &str| json!({"role": "user", "content": [{"toolResult": {"toolUseId": id, "content": [{"text": "r"}]}}]});
        let config = json!({"tools": [{"toolSpec": {"name": "w", "inputSchema": {"json": {"type": "object"}}}}]});
        let ok = json!({"messages": [user("q"), tool_use, result("t1")], "toolConfig": config});
        assert!(converse(&ok).is_ok());
        let no_config = json!({"messages": [user("q"), tool_use, result("t1")]});
        assert_eq!(converse(&no_config).unwrap_err(), NEEDS_TOOL_CONFIG);
        let wrong = json!({"messages": [user("q"), tool_use, result("t9")], "toolConfig": config});
        assert!(converse(&wrong).unwrap_err().contains("exceeds"));
        let missing = json!({"messages": [user("q"), tool_use, user("next")], "toolConfig": config});
        assert!(converse(&missing).unwrap_err().contains("Expected toolResult blocks"));
        let bad_choice = json!({"messages": [user("q")], "toolConfig": {"tools": config["tools"], "toolChoice": {"tool": {"name": "x"}}}});
        assert!(converse(&bad_choice).is_err());
    }

    #[test]
    fn inference_config_and_images() {
        let with = |config: Value| converse(&json!({"messages": [user("q")], "inferenceConfig": config}));
        assert!(with(json!({"maxTokens": 10, "temperature": 0.5, "topP": 1, "stopSequences": ["x"]})).is_ok());
        assert!(with(json!({"maxTokens": 0})).is_err());
        assert!(with(json!({"temperature": 1.5})).is_err());
        let image = |format: &str, bytes: &str| {
            converse(&json!({"messages": [{"role": "user", "content": [
                {"image": {"format": format, "source": {"bytes": bytes}}}
            ]}]}))
        };
        assert!(image("png", "iVBORw0KGgo=").is_ok());
        assert!(image("bmp", "iVBORw0KGgo=").is_err());
        assert!(image("png", "not base64!").is_err());
    }
}
