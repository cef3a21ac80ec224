//! Built-in skill `tollgate/summarize`: summarizes `text` with `model`. The
//! model call goes through the gateway's metered pipeline and is billed to
//! the caller; an empty wallet comes back as the model error (402).

use serde::Deserialize;
use tollgate_plugin_sdk::serde_json::json;
use tollgate_plugin_sdk::skill::{self, CallContext, Description, Skill, SkillError, models};

pub struct Summarize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    text: String,
    /// A gateway model, e.g. `openai/gpt-4o-mini`.
    model: String,
    /// Longest summary wanted, in words.
    #[serde(default = "default_max_words")]
    max_words: u32,
}

fn default_max_words() -> u32 {
    60
}

const INPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The text to summarize"},
    "model": {"type": "string", "description": "The model to use, as <provider>/<model>"},
    "max_words": {"type": "integer", "minimum": 1, "maximum": 2000, "default": 60}
  },
  "required": ["text", "model"],
  "additionalProperties": false
}"#;

const OUTPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {"summary": {"type": "string"}},
  "required": ["summary"]
}"#;

impl Skill for Summarize {
    fn describe() -> Description {
        Description::new("summarize", "Summarizes a text with a model.")
            .instructions("Give `text` and `model`; optionally `max_words` (default 60). Answers {\"summary\"}.")
            .input_schema(INPUT_SCHEMA)
            .output_schema(OUTPUT_SCHEMA)
    }

    fn run(_ctx: CallContext, input: &str) -> Result<String, SkillError> {
        let input: Input = skill::input(input)?;
        if input.text.trim().is_empty() {
            return Err(SkillError::InvalidInput("text is empty".into()));
        }
        if !(1..=2000).contains(&input.max_words) {
            return Err(SkillError::InvalidInput("max_words must be between 1 and 2000".into()));
        }
        let answer = models::chat(&json!({
            "model": input.model,
            "messages": [
                {"role": "system", "content": format!(
                    "Summarize the user's text in at most {} words. Answer with the summary only.",
                    input.max_words
                )},
                {"role": "user", "content": input.text},
            ],
        }))?;
        let summary = answer["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| SkillError::Failed("the model answered no text".into()))?;
        Ok(json!({ "summary": summary.trim() }).to_string())
    }
}

tollgate_plugin_sdk::export_skill!(Summarize);
