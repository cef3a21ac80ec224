//! OpenAI `tools`, `tool_choice` and `response_format` → Converse `toolConfig`.
//!
//! Converse has no JSON mode, so `response_format` `json_object` / `json_schema`
//! becomes a *response tool*: one more tool whose input schema is the wanted
//! schema, which the model is made to call; its input is the answer's content
//! (see `response.rs` and `stream.rs`).
//!
//! `tool_choice: "none"` has no Converse equivalent. The caller's tools are
//! then left out, except when the history holds tool calls or results:
//! Bedrock rejects those without a `toolConfig`, so the tools are sent with no
//! `toolChoice` (the model decides). Tools the history calls but the request
//! does not declare (OpenAI allows dropping `tools` on a follow-up) are
//! declared with an open object schema for the same reason.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tollgate_plugin_sdk::AdapterError;
use tollgate_plugin_sdk::json::RawObject;

use crate::converse::{InputSchema, Tool, ToolChoice, ToolConfig, ToolSpec, raw};
use crate::messages::Conversation;

/// The preferred name of the response tool; a suffix is added if the caller
/// has a tool of that name.
const RESPONSE_TOOL: &str = "json_response";

/// What the request's tool settings become.
#[derive(Debug, Default)]
pub struct ToolPlan {
    /// The Converse `toolConfig`, if any tool is sent.
    pub tool_config: Option<ToolConfig>,
    /// The name of the response tool, when structured output was asked for.
    pub response_tool: Option<String>,
}

/// OpenAI `tool_choice`.
#[derive(Debug, PartialEq, Eq)]
enum Choice {
    /// Absent: the model decides (Converse default).
    Default,
    Auto,
    None,
    Required,
    Named(String),
}

#[derive(Deserialize)]
struct ToolDef {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    function: Option<FunctionDef>,
}

#[derive(Deserialize)]
struct FunctionDef {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct ResponseFormat {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    json_schema: Option<JsonSchemaSpec>,
}

#[derive(Deserialize)]
struct JsonSchemaSpec {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    schema: Option<Box<RawValue>>,
}

/// Plans the `toolConfig` for `request` (the caller's body) and `history`.
pub fn plan(request: &RawObject<'_>, history: &Conversation) -> Result<ToolPlan, AdapterError> {
    let mut specs = caller_tools(request.get_non_null("tools"))?;
    let names: Vec<String> = specs.iter().map(|t| t.tool_spec.name.clone()).collect();
    let choice = tool_choice(request.get_non_null("tool_choice"), &names)?;
    let response = response_tool(request.get_non_null("response_format"), &names)?;

    if choice == Choice::None && !history.has_tool_blocks {
        specs.clear();
    }
    if !specs.is_empty() || history.has_tool_blocks {
        for name in &history.tools_used {
            if !names.contains(name) {
                specs.push(spec(name.clone(), None, raw(r#"{"type":"object"}"#)));
            }
        }
    }
    let has_caller_tools = !specs.is_empty();
    let tool_choice = match (&response, choice) {
        (Some(tool), Choice::None) => Some(ToolChoice::Tool {
            name: tool.tool_spec.name.clone(),
        }),
        (Some(_), Choice::Named(name)) => Some(ToolChoice::Tool { name }),
        // Either a caller tool or the final answer, but some tool.
        (Some(_), _) if has_caller_tools => Some(ToolChoice::Any {}),
        (Some(tool), _) => Some(ToolChoice::Tool {
            name: tool.tool_spec.name.clone(),
        }),
        (None, Choice::Default | Choice::None) => None,
        (None, Choice::Auto) => Some(ToolChoice::Auto {}),
        (None, Choice::Required) => Some(ToolChoice::Any {}),
        (None, Choice::Named(name)) => Some(ToolChoice::Tool { name }),
    };
    let response_tool = response.map(|tool| {
        let name = tool.tool_spec.name.clone();
        specs.push(tool);
        name
    });
    if specs.is_empty() {
        return Ok(ToolPlan::default());
    }
    Ok(ToolPlan {
        tool_config: Some(ToolConfig {
            tools: specs,
            tool_choice,
        }),
        response_tool,
    })
}

fn spec(name: String, description: Option<String>, schema: Box<RawValue>) -> Tool {
    Tool {
        tool_spec: ToolSpec {
            name,
            // Bedrock rejects an empty description.
            description: description.filter(|d| !d.trim().is_empty()),
            input_schema: InputSchema { json: schema },
        },
    }
}

fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// `tools[]` (function tools only) → `[{"toolSpec": …}]`.
fn caller_tools(tools: Option<&RawValue>) -> Result<Vec<Tool>, AdapterError> {
    let Some(tools) = tools else {
        return Ok(Vec::new());
    };
    let tools: Vec<ToolDef> = serde_json::from_str(tools.get())
        .map_err(|e| AdapterError::invalid_request(format!("'tools' must be an array of function tools: {e}")))?;
    let mut specs = Vec::with_capacity(tools.len());
    for (index, tool) in tools.into_iter().enumerate() {
        let at = |what: &str| AdapterError::invalid_request(format!("tools[{index}]: {what}"));
        let kind = tool.kind.as_deref().unwrap_or("function");
        if kind != "function" {
            return Err(at(&format!(
                "tool type '{kind}' is not supported by Bedrock; only 'function'"
            )));
        }
        let function = tool.function.ok_or_else(|| at("needs 'function'"))?;
        let name = function
            .name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| at("needs 'function.name'"))?;
        let schema = match function.parameters {
            Some(schema) if is_object(&schema) => schema,
            Some(_) => return Err(at("'function.parameters' must be a JSON Schema object")),
            None => raw(r#"{"type":"object","properties":{}}"#),
        };
        specs.push(spec(name, function.description, schema));
    }
    Ok(specs)
}

fn tool_choice(choice: Option<&RawValue>, names: &[String]) -> Result<Choice, AdapterError> {
    let Some(choice) = choice else {
        return Ok(Choice::Default);
    };
    let choice: Value = serde_json::from_str(choice.get()).map_err(|e| AdapterError::internal(e.to_string()))?;
    match &choice {
        Value::String(s) if s == "auto" => Ok(Choice::Auto),
        Value::String(s) if s == "none" => Ok(Choice::None),
        Value::String(s) if s == "required" => Ok(Choice::Required),
        Value::Object(object) if object.get("type").and_then(Value::as_str) == Some("function") => {
            let name = object
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| AdapterError::invalid_request("tool_choice needs 'function.name'"))?;
            if !names.iter().any(|n| n == name) {
                return Err(AdapterError::invalid_request(format!(
                    "tool_choice names '{name}', which is not in 'tools'"
                )));
            }
            Ok(Choice::Named(name.to_owned()))
        }
        other => Err(AdapterError::invalid_request(format!(
            "tool_choice {other} is not supported by Bedrock (auto, none, required or a named function)"
        ))),
    }
}

/// The response tool for `response_format`, if it asks for JSON.
fn response_tool(format: Option<&RawValue>, names: &[String]) -> Result<Option<Tool>, AdapterError> {
    let Some(format) = format else {
        return Ok(None);
    };
    let format: ResponseFormat = serde_json::from_str(format.get())
        .map_err(|e| AdapterError::invalid_request(format!("'response_format' is malformed: {e}")))?;
    let (schema, description) = match format.kind.as_deref() {
        Some("text") => return Ok(None),
        Some("json_object") => (
            raw(r#"{"type":"object"}"#),
            "Give your final answer as a JSON object by calling this tool.".to_owned(),
        ),
        Some("json_schema") => {
            let spec = format
                .json_schema
                .ok_or_else(|| AdapterError::invalid_request("response_format.json_schema is required"))?;
            let schema = spec
                .schema
                .filter(|s| is_object(s))
                .ok_or_else(|| AdapterError::invalid_request("response_format.json_schema.schema is required"))?;
            let mut description = String::from("Give your final answer by calling this tool");
            if let Some(name) = &spec.name {
                description.push_str(&format!(" with the '{name}' object"));
            }
            description.push('.');
            if let Some(extra) = spec.description.filter(|d| !d.trim().is_empty()) {
                description.push(' ');
                description.push_str(&extra);
            }
            (schema, description)
        }
        other => {
            return Err(AdapterError::invalid_request(format!(
                "response_format type {} is not supported (text, json_object, json_schema)",
                other.map_or("(missing)".to_owned(), |t| format!("'{t}'"))
            )));
        }
    };
    let mut name = RESPONSE_TOOL.to_owned();
    let mut n = 1;
    while names.contains(&name) {
        name = format!("{RESPONSE_TOOL}_{n}");
        n += 1;
    }
    Ok(Some(spec(name, Some(description), schema)))
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn plan_for(request: Value, history: &Conversation) -> Result<ToolPlan, AdapterError> {
        let text = request.to_string();
        plan(&RawObject::parse(&text).unwrap(), history)
    }

    fn config_json(plan: ToolPlan) -> Option<Value> {
        plan.tool_config.map(|c| serde_json::to_value(c).unwrap())
    }

    fn weather() -> Value {
        json!([{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}])
    }

    #[test]
    fn tool_choice_variants() {
        let none = Conversation::default();
        let choice = |c: Value| config_json(plan_for(json!({"tools": weather(), "tool_choice": c}), &none).unwrap());
        assert_eq!(choice(json!("auto")).unwrap()["toolChoice"], json!({"auto": {}}));
        assert_eq!(choice(json!("required")).unwrap()["toolChoice"], json!({"any": {}}));
        assert_eq!(
            choice(json!({"type": "function", "function": {"name": "w"}})).unwrap()["toolChoice"],
            json!({"tool": {"name": "w"}})
        );
        assert_eq!(choice(json!("none")), None);
        assert!(choice(Value::Null).unwrap().get("toolChoice").is_none());
        assert!(
            plan_for(
                json!({"tools": weather(), "tool_choice": {"type": "function", "function": {"name": "x"}}}),
                &none
            )
            .is_err()
        );
        assert!(plan_for(json!({"tools": [{"type": "web_search"}]}), &none).is_err());
    }

    #[test]
    fn history_keeps_a_tool_config() {
        let history = Conversation {
            tools_used: vec!["w".into(), "old".into()],
            has_tool_blocks: true,
            ..Default::default()
        };
        let config =
            config_json(plan_for(json!({"tools": weather(), "tool_choice": "none"}), &history).unwrap()).unwrap();
        assert!(config.get("toolChoice").is_none());
        let names: Vec<_> = config["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["toolSpec"]["name"].clone())
            .collect();
        assert_eq!(names, ["w", "old"]);
        assert_eq!(
            config["tools"][1]["toolSpec"]["inputSchema"],
            json!({"json": {"type": "object"}})
        );
        // No tools in the request at all: still declared.
        let config = config_json(plan_for(json!({}), &history).unwrap()).unwrap();
        assert_eq!(config["tools"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn structured_output_is_a_forced_tool() {
        let none = Conversation::default();
        let format = json!({"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object"}}});
        let p = plan_for(json!({"response_format": format}), &none).unwrap();
        assert_eq!(p.response_tool.as_deref(), Some("json_response"));
        assert_eq!(
            config_json(p).unwrap()["toolChoice"],
            json!({"tool": {"name": "json_response"}})
        );
        // With caller tools: some tool, either a real one or the answer.
        let tools = json!([{"type": "function", "function": {"name": "json_response"}}]);
        let p = plan_for(json!({"response_format": format, "tools": tools}), &none).unwrap();
        assert_eq!(p.response_tool.as_deref(), Some("json_response_1"));
        assert_eq!(config_json(p).unwrap()["toolChoice"], json!({"any": {}}));
        assert!(
            plan_for(
                json!({"response_format": {"type": "json_schema", "json_schema": {}}}),
                &none
            )
            .is_err()
        );
        assert!(
            plan_for(json!({"response_format": {"type": "text"}}), &none)
                .unwrap()
                .tool_config
                .is_none()
        );
    }
}
