//! The Converse request body, as typed values serialized in Bedrock's JSON
//! form. JSON documents the caller wrote (tool schemas, tool-call arguments)
//! stay [`RawValue`]s, so their key order reaches the model as written
//! (`serde_json::Value` would sort object keys).

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Body {
    pub messages: Vec<Turn>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inference_config: Option<InferenceConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig>,
}

/// One message: `role` is `user` or `assistant`.
#[derive(Debug, Serialize)]
pub struct Turn {
    pub role: &'static str,
    pub content: Vec<Block>,
}

/// `{"text": …}`, the only system block the adapter writes.
#[derive(Debug, Serialize)]
pub struct Text {
    pub text: String,
}

/// A content block: a union, serialized as `{"<member>": …}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Block {
    Text(String),
    Image(Image),
    ToolUse(ToolUse),
    ToolResult(ToolResult),
}

#[derive(Debug, Serialize)]
pub struct Image {
    /// `png`, `jpeg`, `gif` or `webp`.
    pub format: &'static str,
    pub source: ImageSource,
}

/// The JSON form of a blob is its base64 text.
#[derive(Debug, Serialize)]
pub struct ImageSource {
    pub bytes: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUse {
    pub tool_use_id: String,
    pub name: String,
    pub input: Box<RawValue>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_use_id: String,
    pub content: Vec<Text>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The caller's number as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
}

impl InferenceConfig {
    pub fn is_empty(&self) -> bool {
        self.max_tokens.is_none()
            && self.temperature.is_none()
            && self.top_p.is_none()
            && self.stop_sequences.is_empty()
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig {
    pub tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

/// `{"toolSpec": …}` (the only tool kind the adapter writes).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub tool_spec: ToolSpec,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: InputSchema,
}

#[derive(Debug, Serialize)]
pub struct InputSchema {
    pub json: Box<RawValue>,
}

/// `{"auto":{}}`, `{"any":{}}` or `{"tool":{"name":…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolChoice {
    Auto {},
    Any {},
    Tool { name: String },
}

/// Raw JSON text for a document built by the adapter itself.
pub fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).expect("the adapter's own JSON literals are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_in_bedrock_form() {
        let body = Body {
            messages: vec![Turn {
                role: "assistant",
                content: vec![
                    Block::Text("hi".into()),
                    Block::ToolUse(ToolUse {
                        tool_use_id: "t".into(),
                        name: "f".into(),
                        input: raw(r#"{"b":1,"a":2}"#),
                    }),
                ],
            }],
            system: Vec::new(),
            inference_config: None,
            tool_config: Some(ToolConfig {
                tools: vec![Tool {
                    tool_spec: ToolSpec {
                        name: "f".into(),
                        description: None,
                        input_schema: InputSchema { json: raw("{}") },
                    },
                }],
                tool_choice: Some(ToolChoice::Any {}),
            }),
        };
        let text = serde_json::to_string(&body).unwrap();
        assert!(
            text.contains(r#"{"toolUse":{"toolUseId":"t","name":"f","input":{"b":1,"a":2}}}"#),
            "{text}"
        );
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["toolConfig"]["toolChoice"], json!({"any": {}}));
        assert_eq!(value["messages"][0]["content"][0], json!({"text": "hi"}));
        assert!(value.get("system").is_none() && value.get("inferenceConfig").is_none());
    }
}
