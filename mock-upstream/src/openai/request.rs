//! The parts of an OpenAI chat-completions request the mock reads. Strings
//! borrow from the body where they can, and message contents stay raw until
//! needed, so the common small request costs few allocations.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::directives::Directives;

#[derive(Deserialize)]
pub struct ChatRequest<'a> {
    #[serde(borrow)]
    pub model: Cow<'a, str>,
    #[serde(default, borrow)]
    pub messages: Vec<Message<'a>>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub tools: Option<Vec<Tool>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    #[serde(default)]
    pub mock: Option<Directives>,
}

#[derive(Deserialize)]
pub struct Message<'a> {
    #[serde(borrow)]
    pub role: Cow<'a, str>,
    #[serde(default, borrow)]
    pub content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

#[derive(Deserialize)]
pub struct Tool {
    pub function: FunctionDef,
}

#[derive(Deserialize)]
pub struct FunctionDef {
    pub name: String,
    #[serde(default)]
    pub parameters: Option<Value>,
}

#[derive(Deserialize)]
pub struct ResponseFormat {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub json_schema: Option<JsonSchemaFormat>,
}

#[derive(Deserialize)]
pub struct JsonSchemaFormat {
    #[serde(default)]
    pub schema: Option<Value>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
}

impl ChatRequest<'_> {
    pub fn streaming(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// Σ over messages of (words in its text + 4): see the crate docs.
    pub fn prompt_tokens(&self) -> u64 {
        self.messages
            .iter()
            .map(|m| crate::text::word_count(&m.text()) as u64 + 4)
            .sum()
    }
}

impl Message<'_> {
    /// Text content: a string, or the `text` parts of an array joined by a
    /// space; anything else (null, images only) is empty.
    pub fn text(&self) -> Cow<'_, str> {
        let Some(raw) = self.content else {
            return Cow::Borrowed("");
        };
        let json = raw.get();
        if json.starts_with('"') {
            // Borrowing fails only when the string has escapes.
            serde_json::from_str::<&str>(json)
                .map(Cow::Borrowed)
                .or_else(|_| serde_json::from_str::<String>(json).map(Cow::Owned))
                .unwrap_or_default()
        } else if json.starts_with('[') {
            let parts: Vec<Part> = serde_json::from_str(json).unwrap_or_default();
            let texts: Vec<String> = parts.into_iter().filter_map(|p| p.text).collect();
            Cow::Owned(texts.join(" "))
        } else {
            Cow::Borrowed("")
        }
    }
}
