//! The `src/lib.rs` of a new tool server and of a new skill. `{NAME}` is the
//! crate name. Each compiles as it is and does something real, so the first
//! build, publish and call succeed before the author changes anything.

pub const TOOL_SERVER_RS: &str = r##"//! Tool server `{NAME}`: offers `word_count`, which counts the words of a
//! text. Add tools to `tools()` and answer them in `call()`. To reach the
//! network, list hosts under `metadata.allowed_hosts` (with the `http`
//! capability) in tollgate-package.json and use `tool::http`. It is on tool
//! WIT 0.4.0: answers may hold images, audio and resources
//! (`Content::image`, …), `tool::progress::report` tells the client how far a
//! call has got, `tool::elicitation::elicit` asks the MCP client's user for
//! input, `tool::models::complete` asks a model through the gateway, billed
//! to the tool's caller (add `"models"` to `metadata.capabilities` first),
//! and `prompts()`, `resources()` and `complete()` offer MCP prompts and
//! resources (none unless you add them).

use serde::Deserialize;
use tollgate_plugin_sdk::serde_json::json;
use tollgate_plugin_sdk::tool::{self, CallContext, Content, Tool, ToolError, ToolServer};

pub struct MyTools;

#[derive(Deserialize)]
struct WordCount {
    text: String,
}

impl ToolServer for MyTools {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::new("word_count", "Counts the words of a text.")
                .input_schema(r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#)
                .output_schema(r#"{"type":"object","properties":{"words":{"type":"integer"}}}"#)
                .read_only()
                .open_world(false),
        ]
    }

    fn call(_ctx: CallContext, name: &str, arguments: &str) -> Result<Vec<Content>, ToolError> {
        match name {
            "word_count" => {
                let arguments: WordCount = tool::arguments(arguments)?;
                let words = arguments.text.split_whitespace().count();
                Ok(vec![Content::json(&json!({ "words": words }))])
            }
            _ => Err(ToolError::unknown_tool(name)),
        }
    }
}

tollgate_plugin_sdk::export_tool_server!(MyTools);
"##;

pub const SKILL_RS: &str = r##"//! Skill `{NAME}`: answers a question with a model, through the gateway
//! (metered and billed to the caller). Change `run()` to chain model and
//! tool calls (`skill::tools::call`) into your task.

use serde::Deserialize;
use tollgate_plugin_sdk::serde_json::json;
use tollgate_plugin_sdk::skill::{self, CallContext, Description, Skill, SkillError, models};

pub struct MySkill;

#[derive(Deserialize)]
struct Input {
    question: String,
    model: String,
}

impl Skill for MySkill {
    fn describe() -> Description {
        Description::new("{NAME}", "Answers a question in one sentence.")
            .input_schema(r#"{"type":"object","properties":{"question":{"type":"string"},"model":{"type":"string"}},"required":["question","model"]}"#)
            .output_schema(r#"{"type":"object","properties":{"answer":{"type":"string"}}}"#)
    }

    fn run(_ctx: CallContext, input: &str) -> Result<String, SkillError> {
        let input: Input = skill::input(input)?;
        let answer = models::complete(&input.model, &format!("Answer in one sentence: {}", input.question))?;
        Ok(json!({ "answer": answer }).to_string())
    }
}

tollgate_plugin_sdk::export_skill!(MySkill);
"##;

pub const GUARDRAIL_RS: &str = r##"//! Guardrail `{NAME}`: refuses a request whose user text contains the
//! install's `word` setting (default `forbidden`), and masks the word in
//! answers. Change `check_request` and `check_response` to your policy.

use tollgate_plugin_sdk::guardrail::{
    CallContext, Description, Guardrail, RequestVerdict, ResponseVerdict, Subject, Text, config,
};

pub struct MyGuardrail;

fn word() -> String {
    config::get("word").unwrap_or_else(|| "forbidden".to_string()).to_lowercase()
}

impl Guardrail for MyGuardrail {
    fn describe() -> Description {
        Description::new("{NAME}", "Refuses prompts with a configured word and masks it in answers.")
            .requests()
            .responses()
    }

    fn check_request(_ctx: CallContext, _subject: Subject, _request: &str, texts: Vec<Text>) -> RequestVerdict {
        let word = word();
        match texts.iter().any(|t| t.role == "user" && t.content.to_lowercase().contains(&word)) {
            true => RequestVerdict::Deny(format!("the prompt contains '{word}'")),
            false => RequestVerdict::Allow,
        }
    }

    fn check_response(
        _ctx: CallContext,
        _subject: Subject,
        _request: &str,
        _memo: Option<String>,
        texts: Vec<String>,
        _done: bool,
    ) -> ResponseVerdict {
        let word = word();
        if !texts.iter().any(|t| t.to_lowercase().contains(&word)) {
            return ResponseVerdict::Allow;
        }
        let mask = "*".repeat(word.chars().count());
        ResponseVerdict::Rewrite(texts.iter().map(|t| t.replace(&word, &mask)).collect())
    }
}

tollgate_plugin_sdk::export_guardrail!(MyGuardrail);
"##;
