//! Decides what the assistant says: a text reply or a tool call. Pure and
//! deterministic, so tests can predict every byte.

use serde_json::Value;

use super::request::{ChatRequest, Tool};
use crate::directives::Directives;
use crate::{generate, text};

pub enum Answer {
    Text(String),
    ToolCall { name: String, arguments: String },
}

/// A request the mock cannot answer (reported as a 400 on `param`).
pub struct Invalid {
    pub message: String,
    pub param: &'static str,
}

impl Answer {
    pub fn decide(req: &ChatRequest<'_>, directives: &Directives) -> Result<Self, Invalid> {
        let last = req.messages.last();
        let after_tool_result = last.is_some_and(|m| m.role == "tool");
        if let Some(tool) = chosen_tool(req)?
            && !after_tool_result
        {
            let arguments = match &tool.function.parameters {
                Some(schema) => generate::instance(schema).to_string(),
                None => "{}".to_owned(),
            };
            return Ok(Self::ToolCall {
                name: tool.function.name.clone(),
                arguments,
            });
        }
        let mut reply = directives.reply_text().unwrap_or_else(|| match last {
            Some(m) if after_tool_result => format!("Tool result: {}", m.text()),
            _ => {
                let user = req.messages.iter().rev().find(|m| m.role == "user");
                format!("You said: {}", user.map(|m| m.text()).unwrap_or_default())
            }
        });
        // A trailing assistant message is a partial answer to continue (as a
        // gateway sends after a mid-stream failover): answer only the rest.
        if let Some(partial) = last.filter(|m| m.role == "assistant").map(|m| m.text())
            && let Some(rest) = reply.strip_prefix(&*partial)
        {
            reply = rest.to_string();
        }
        let content = match req.response_format.as_ref().map(|f| f.kind.as_str()) {
            Some("json_object") => serde_json::json!({ "reply": reply }).to_string(),
            Some("json_schema") => {
                let schema = req
                    .response_format
                    .as_ref()
                    .and_then(|f| f.json_schema.as_ref())
                    .and_then(|s| s.schema.as_ref());
                match schema {
                    Some(schema) => generate::instance(schema).to_string(),
                    None => {
                        return Err(Invalid {
                            message: "response_format.json_schema.schema is required".into(),
                            param: "response_format",
                        });
                    }
                }
            }
            _ => reply,
        };
        Ok(Self::Text(content))
    }

    /// See the crate docs for the usage arithmetic.
    pub fn completion_tokens(&self) -> u64 {
        match self {
            Self::Text(content) => text::word_count(content) as u64,
            Self::ToolCall { arguments, .. } => text::word_count(arguments).max(1) as u64,
        }
    }
}

/// The tool to call, if tools are offered and `tool_choice` allows one.
fn chosen_tool<'r>(req: &'r ChatRequest<'_>) -> Result<Option<&'r Tool>, Invalid> {
    let tools = match req.tools.as_deref() {
        Some(tools) if !tools.is_empty() => tools,
        _ => return Ok(None),
    };
    match &req.tool_choice {
        Some(Value::String(choice)) if choice == "none" => Ok(None),
        Some(Value::Object(choice)) => {
            let name = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str);
            match name {
                None => Ok(tools.first()),
                Some(name) => match tools.iter().find(|t| t.function.name == name) {
                    Some(tool) => Ok(Some(tool)),
                    None => Err(Invalid {
                        message: format!("tool_choice names unknown tool '{name}'"),
                        param: "tool_choice",
                    }),
                },
            }
        }
        _ => Ok(tools.first()),
    }
}
