//! Test-only skill: calls the tool named by its input, through the host's
//! `tools` capability, and answers what the tool answered. Input
//! `{"tool": "<install>__<tool>", "arguments": {...}}`; output
//! `{"content": ["<text or JSON>", ...]}`. Naming its own `…__run` makes it
//! call itself, which the host stops at the depth limit.

use serde::Deserialize;
use tollgate_plugin_sdk::serde_json::{Value, json};
use tollgate_plugin_sdk::skill::{self, CallContext, Content, Description, Skill, SkillError, tools};

pub struct ToolCaller;

#[derive(Deserialize)]
struct Input {
    tool: String,
    #[serde(default)]
    arguments: Value,
}

impl Skill for ToolCaller {
    fn describe() -> Description {
        Description::new("tool-caller", "Calls the tool its input names.")
    }

    fn run(_ctx: CallContext, input: &str) -> Result<String, SkillError> {
        let input: Input = skill::input(input)?;
        let arguments = if input.arguments.is_null() {
            json!({})
        } else {
            input.arguments
        };
        let content = tools::call(&input.tool, &arguments).map_err(|e| SkillError::Failed(e.message))?;
        let parts: Vec<String> = content
            .into_iter()
            .map(|part| match part {
                Content::Text(text) | Content::Json(text) => text,
            })
            .collect();
        Ok(json!({ "content": parts }).to_string())
    }
}

tollgate_plugin_sdk::export_skill!(ToolCaller);
