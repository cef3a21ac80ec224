//! Responses tools → chat function tools, and the model's calls back into
//! the item the caller's tool has.
//!
//! - `function` tools pass as function tools.
//! - A `namespace` tool groups the caller's own function tools (Codex's
//!   `multi_agent_v1`): each becomes the function `<namespace>__<name>`, and a
//!   call to it comes back as a `function_call` item with `namespace` and the
//!   tool's own `name`.
//! - A `custom` (freeform) tool (Codex's `apply_patch`) takes one string: it
//!   becomes a function with one string parameter, `input`, and a call to it
//!   comes back as a `custom_tool_call` item with that string as `input`.
//! - Hosted tools (`web_search`, `file_search`, `code_interpreter`, …) run
//!   inside OpenAI's service, which no chat-completions provider has. One the
//!   request only offers (`tool_choice` is not that tool) is left out and
//!   named in `service.warnings`, as a model may answer without an offered
//!   tool; one `tool_choice` forces is refused with a 400 naming the tool
//!   and the model.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use tollgate_web::error::ApiError;

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::invalid_request(message).with_param(param)
}

/// How chat tool names map back to the request's tools.
#[derive(Clone, Debug, Default)]
pub struct ToolNames {
    /// `<namespace>__<name>` → (namespace, name).
    namespaced: HashMap<String, (String, String)>,
    /// Names of custom (freeform) tools.
    custom: HashSet<String>,
}

/// The request's tools in chat form.
#[derive(Debug)]
pub struct Tools {
    pub chat: Vec<Value>,
    pub names: ToolNames,
    /// Why each hosted tool was left out, for `service.warnings`.
    pub warnings: Vec<String>,
}

/// The chat function name of `name` in `namespace`.
pub fn flat_name(namespace: &str, name: &str) -> String {
    format!("{namespace}__{name}")
}

/// The one string a custom tool's function takes.
fn custom_parameters() -> Value {
    json!({"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"], "additionalProperties": false})
}

/// `tools` → chat tools. `model` names the model in errors and warnings.
pub fn translate(tools: Value, tool_choice: Option<&Value>, model: &str) -> Result<Tools, ApiError> {
    let Value::Array(tools) = tools else {
        return Err(invalid("'tools' must be an array.", "tools"));
    };
    let forced = tool_choice
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .filter(|kind| !matches!(*kind, "function" | "custom" | "allowed_tools"));
    let mut out = Tools {
        chat: Vec::with_capacity(tools.len()),
        names: ToolNames::default(),
        warnings: Vec::new(),
    };
    for tool in &tools {
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => out.chat.push(function(tool, None)?),
            Some("custom") => {
                let name = name_of(tool)?;
                let mut description = tool
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if let Some(definition) = tool.pointer("/format/definition").and_then(Value::as_str) {
                    // A grammar the provider cannot enforce: the model reads it instead.
                    description.push_str("\n\nThe input must follow this grammar:\n");
                    description.push_str(definition);
                }
                out.chat.push(json!({"type": "function", "function": {
                    "name": name, "description": description, "parameters": custom_parameters(),
                }}));
                out.names.custom.insert(name.to_string());
            }
            Some("namespace") => {
                let namespace = name_of(tool)?;
                let Some(Value::Array(members)) = tool.get("tools") else {
                    return Err(invalid(
                        format!("Namespace '{namespace}' needs a 'tools' array."),
                        "tools",
                    ));
                };
                for member in members {
                    if member.get("type").and_then(Value::as_str) != Some("function") {
                        return Err(invalid(
                            format!("Namespace '{namespace}' may hold only function tools."),
                            "tools",
                        ));
                    }
                    let name = name_of(member)?;
                    let flat = flat_name(namespace, name);
                    out.chat.push(function(member, Some(&flat))?);
                    out.names
                        .namespaced
                        .insert(flat, (namespace.to_string(), name.to_string()));
                }
            }
            other => {
                let kind = other.unwrap_or("(none)");
                if forced == Some(kind) {
                    return Err(invalid(
                        format!(
                            "'tool_choice' requires the '{kind}' tool, which runs only inside OpenAI's service; \
                             model '{model}' is served through chat completions and cannot use it."
                        ),
                        "tool_choice",
                    ));
                }
                out.warnings.push(format!(
                    "The '{kind}' tool was left out: it runs only inside OpenAI's service, and model '{model}' \
                     is served through chat completions."
                ));
            }
        }
    }
    if let Some(kind) = forced {
        return Err(invalid(
            format!("'tool_choice' names a '{kind}' tool the request does not offer."),
            "tool_choice",
        ));
    }
    Ok(out)
}

fn name_of(tool: &Value) -> Result<&str, ApiError> {
    tool.get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid("Every tool needs a 'name'.", "tools"))
}

/// A function tool as a chat tool, under `flat` when it is in a namespace.
fn function(tool: &Value, flat: Option<&str>) -> Result<Value, ApiError> {
    let name = name_of(tool)?;
    let mut function = json!({"name": flat.unwrap_or(name)});
    for key in ["description", "parameters", "strict"] {
        if let Some(value) = tool.get(key).filter(|v| !v.is_null()) {
            function[key] = value.clone();
        }
    }
    Ok(json!({"type": "function", "function": function}))
}

/// `tool_choice` → the chat form. A hosted tool's has been refused by
/// [`translate`] already.
pub fn translate_choice(choice: Value) -> Result<Value, ApiError> {
    match &choice {
        Value::String(mode) if matches!(mode.as_str(), "auto" | "none" | "required") => Ok(choice),
        Value::Object(named) => match named.get("type").and_then(Value::as_str) {
            Some("function" | "custom") => {
                let name = named.get("name").and_then(Value::as_str);
                let namespace = named.get("namespace").and_then(Value::as_str);
                match (name, namespace) {
                    (Some(name), Some(namespace)) => {
                        Ok(json!({"type": "function", "function": {"name": flat_name(namespace, name)}}))
                    }
                    (Some(name), None) => Ok(json!({"type": "function", "function": {"name": name}})),
                    (None, _) => Err(invalid("A named tool_choice needs a 'name'.", "tool_choice")),
                }
            }
            // The tools the model may pick from: the chat form cannot narrow
            // the list, so only the mode is kept.
            Some("allowed_tools") => Ok(json!(match named.get("mode").and_then(Value::as_str) {
                Some("required") => "required",
                _ => "auto",
            })),
            _ => Err(invalid(
                "'tool_choice' must be auto, none, required, a function or a custom tool.",
                "tool_choice",
            )),
        },
        _ => Err(invalid(
            "'tool_choice' must be auto, none, required, a function or a custom tool.",
            "tool_choice",
        )),
    }
}

impl ToolNames {
    /// Whether the chat function `name` stands for a custom tool.
    pub fn is_custom(&self, name: &str) -> bool {
        self.custom.contains(name)
    }

    /// The output item of a chat tool call: a `function_call` (with its
    /// `namespace`) or a `custom_tool_call`.
    pub fn call_item(&self, call_id: &str, name: &Value, arguments: &str, status: &str) -> Value {
        let flat = name.as_str().unwrap_or_default();
        if self.is_custom(flat) {
            return json!({
                "type": "custom_tool_call", "id": format!("ctc_{call_id}"), "call_id": call_id,
                "name": name, "input": custom_input(arguments), "status": status,
            });
        }
        let mut item = json!({
            "type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
            "name": name, "arguments": arguments, "status": status,
        });
        if let Some((namespace, own)) = self.namespaced.get(flat) {
            item["namespace"] = json!(namespace);
            item["name"] = json!(own);
        }
        item
    }
}

/// A custom tool call's `input`: the string argument the function took (the
/// arguments as sent, should the model have written something else).
pub fn custom_input(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| v.get("input").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| arguments.to_string())
}

/// A `custom_tool_call` input item's arguments, as the chat function takes them.
pub fn custom_arguments(input: &str) -> String {
    json!({"input": input}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_flatten_and_calls_map_back() {
        let tools = json!([
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": [
                {"type": "function", "name": "close_agent", "parameters": {"type": "object"}, "strict": false}]},
            {"type": "custom", "name": "apply_patch", "description": "Patch files.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
            {"type": "web_search", "external_web_access": false},
        ]);
        let out = translate(tools, Some(&json!("auto")), "demo/small").unwrap();
        let names: Vec<&str> = out
            .chat
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["exec_command", "multi_agent_v1__close_agent", "apply_patch"]);
        assert_eq!(out.chat[2]["function"]["parameters"]["required"], json!(["input"]));
        assert!(
            out.chat[2]["function"]["description"]
                .as_str()
                .unwrap()
                .ends_with("start: x")
        );
        assert_eq!(out.warnings.len(), 1);
        assert!(out.warnings[0].contains("'web_search'") && out.warnings[0].contains("demo/small"));

        let call = out
            .names
            .call_item("c1", &json!("multi_agent_v1__close_agent"), "{}", "completed");
        assert_eq!(
            (call["namespace"].as_str(), call["name"].as_str()),
            (Some("multi_agent_v1"), Some("close_agent"))
        );
        let patch = out.names.call_item(
            "c2",
            &json!("apply_patch"),
            r#"{"input":"*** Begin Patch"}"#,
            "completed",
        );
        assert_eq!(patch["type"], "custom_tool_call");
        assert_eq!(patch["input"], "*** Begin Patch");
        let plain = out.names.call_item("c3", &json!("exec_command"), "{}", "completed");
        assert_eq!(plain["type"], "function_call");
        assert!(plain.get("namespace").is_none());
    }

    #[test]
    fn a_forced_hosted_tool_is_refused_naming_tool_and_model() {
        let tools = json!([{"type": "web_search"}]);
        let error = translate(tools, Some(&json!({"type": "web_search"})), "demo/small").unwrap_err();
        assert_eq!(error.param, Some("tool_choice"));
        assert!(error.message.contains("web_search") && error.message.contains("demo/small"));
    }

    #[test]
    fn choices_name_flat_functions() {
        let choice = translate_choice(json!({"type": "function", "name": "close_agent", "namespace": "ns"})).unwrap();
        assert_eq!(choice["function"]["name"], "ns__close_agent");
        let choice = translate_choice(json!({"type": "custom", "name": "apply_patch"})).unwrap();
        assert_eq!(choice["function"]["name"], "apply_patch");
        assert_eq!(
            translate_choice(json!({"type": "allowed_tools", "mode": "auto", "tools": []})).unwrap(),
            "auto"
        );
    }
}
