//! Decides what the assistant says: a text reply or a tool call. Pure and
//! deterministic, so tests can predict every byte.

use serde::Deserialize;
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
        if let Some(script) = PromptScript::find(req)? {
            return script.answer(req, directives);
        }
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
        if directives.unformatted {
            return Ok(Answer::Text(reply));
        }
        format_reply(req, reply)
    }

    /// See the crate docs for the usage arithmetic.
    pub fn completion_tokens(&self) -> u64 {
        match self {
            Self::Text(content) => text::word_count(content) as u64,
            Self::ToolCall { arguments, .. } => text::word_count(arguments).max(1) as u64,
        }
    }
}

/// The reply text in the shape `response_format` asks for.
fn format_reply(req: &ChatRequest<'_>, reply: String) -> Result<Answer, Invalid> {
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
    Ok(Answer::Text(content))
}

/// A script in the prompt: `<mock>{"reply": …, "tool": …, "arguments": {…}}</mock>`
/// anywhere in a user message's text. It scripts a client whose request body
/// a test cannot touch (a coding agent run unmodified): only the prompt is the
/// test's. With `tool`, the first answer calls that tool (it must be offered)
/// with `arguments`, and once a tool result follows the scripted message the
/// answer is `Tool result: <the last tool result>`; without `tool` no tool is
/// called and the answer is `reply` (else the usual echo).
#[derive(Deserialize)]
struct PromptScript {
    #[serde(default)]
    reply: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
    /// Index of the user message that holds the script.
    #[serde(skip)]
    at: usize,
}

impl PromptScript {
    const OPEN: &'static str = "<mock>";
    const CLOSE: &'static str = "</mock>";

    /// The script of the latest user message that has one.
    fn find(req: &ChatRequest<'_>) -> Result<Option<Self>, Invalid> {
        for (at, message) in req.messages.iter().enumerate().rev() {
            if message.role != "user" {
                continue;
            }
            let text = message.text();
            let Some(start) = text.find(Self::OPEN) else { continue };
            let rest = &text[start + Self::OPEN.len()..];
            let Some(end) = rest.find(Self::CLOSE) else { continue };
            let mut script: PromptScript = serde_json::from_str(&rest[..end]).map_err(|e| Invalid {
                message: format!("mock: the <mock> script in the prompt is not valid: {e}"),
                param: "messages",
            })?;
            script.at = at;
            return Ok(Some(script));
        }
        Ok(None)
    }

    fn answer(self, req: &ChatRequest<'_>, directives: &Directives) -> Result<Answer, Invalid> {
        let tool_result = req.messages[self.at..].iter().rev().find(|m| m.role == "tool");
        if let Some(result) = tool_result {
            return format_reply(req, format!("Tool result: {}", result.text()));
        }
        if let Some(name) = self.tool {
            let offered = req.tools.iter().flatten().any(|t| t.function.name == name);
            if !offered {
                return Err(Invalid {
                    message: format!("mock: the prompt's script calls tool '{name}', which the request does not offer"),
                    param: "tools",
                });
            }
            let arguments = self.arguments.unwrap_or_else(|| Value::Object(Default::default()));
            return Ok(Answer::ToolCall {
                name,
                arguments: arguments.to_string(),
            });
        }
        let reply = directives
            .reply_text()
            .or(self.reply)
            .unwrap_or_else(|| format!("You said: {}", req.messages[self.at].text()));
        format_reply(req, reply)
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
