//! Reading a chat-completions request's parameters, for adapters that build
//! their provider's body from scratch: the body as an object, `messages`,
//! numbers, `n`, the output limit, `stop`, `tool_choice`, `response_format`
//! and `reasoning_effort`. Each reader checks the OpenAI shape and names the
//! field in its error; what a provider accepts of it stays in the adapter.

use serde_json::{Map, Value};

use crate::AdapterError;

/// The caller's body, which must be a JSON object.
pub fn request_object(body: &[u8]) -> Result<Map<String, Value>, AdapterError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(AdapterError::invalid_request("request body must be a JSON object")),
    }
}

/// The request's `messages`, which must be an array.
pub fn messages(request: &Map<String, Value>) -> Result<&[Value], AdapterError> {
    match request.get("messages") {
        Some(Value::Array(list)) => Ok(list),
        _ => Err(AdapterError::invalid_request("'messages' must be an array")),
    }
}

/// A numeric field, `None` when absent or null.
pub fn number(request: &Map<String, Value>, key: &str) -> Result<Option<f64>, AdapterError> {
    Ok(number_as_sent(request, key)?.and_then(Value::as_f64))
}

/// A numeric field as the caller wrote it (`1` stays an integer), `None`
/// when absent or null.
pub fn number_as_sent<'a>(request: &'a Map<String, Value>, key: &str) -> Result<Option<&'a Value>, AdapterError> {
    match request.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) if value.is_number() => Ok(Some(value)),
        Some(_) => Err(AdapterError::invalid_request(format!("'{key}' must be a number"))),
    }
}

/// Refuses `n > 1`: `adapter` (e.g. "the Gemini adapter") answers with one
/// choice per request.
pub fn require_one_choice(request: &Map<String, Value>, adapter: &str) -> Result<(), AdapterError> {
    if number(request, "n")?.is_some_and(|n| n > 1.0) {
        return Err(AdapterError::invalid_request(format!(
            "{adapter} returns one choice per request: 'n' must be 1"
        )));
    }
    Ok(())
}

/// The caller's output limit: `max_completion_tokens`, else the older
/// `max_tokens`; `None` when neither is set. Adapters check its range.
pub fn max_tokens(request: &Map<String, Value>) -> Result<Option<f64>, AdapterError> {
    match number(request, "max_completion_tokens")? {
        Some(n) => Ok(Some(n)),
        None => number(request, "max_tokens"),
    }
}

/// `stop`: one string or an array of strings; empty when absent or null.
pub fn stop_sequences(request: &Map<String, Value>) -> Result<Vec<&str>, AdapterError> {
    let invalid = || AdapterError::invalid_request("'stop' must be a string or an array of strings");
    match request.get("stop") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(stop)) => Ok(vec![stop.as_str()]),
        Some(Value::Array(list)) => list.iter().map(|s| s.as_str().ok_or_else(invalid)).collect(),
        Some(_) => Err(invalid()),
    }
}

/// OpenAI `tool_choice`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChoice<'a> {
    Auto,
    None,
    Required,
    /// `{"type": "function", "function": {"name": …}}`.
    Function(&'a str),
}

/// `tool_choice`; `None` when absent or null.
pub fn tool_choice(request: &Map<String, Value>) -> Result<Option<ToolChoice<'_>>, AdapterError> {
    let choice = match request.get("tool_choice") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(choice)) => match choice.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(AdapterError::invalid_request(format!(
                    "tool_choice '{other}' is not one of auto, none, required"
                )));
            }
        },
        Some(Value::Object(choice)) => {
            let name = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| AdapterError::invalid_request("tool_choice.function.name is required"))?;
            ToolChoice::Function(name)
        }
        Some(_) => {
            return Err(AdapterError::invalid_request(
                "tool_choice must be a string or an object",
            ));
        }
    };
    Ok(Some(choice))
}

/// OpenAI `response_format`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ResponseFormat<'a> {
    /// Absent, null or `text`.
    Text,
    JsonObject,
    /// `json_schema.schema`, an object.
    JsonSchema(&'a Value),
}

/// `response_format`.
pub fn response_format(request: &Map<String, Value>) -> Result<ResponseFormat<'_>, AdapterError> {
    let Some(format) = request.get("response_format").filter(|v| !v.is_null()) else {
        return Ok(ResponseFormat::Text);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(ResponseFormat::Text),
        Some("json_object") => Ok(ResponseFormat::JsonObject),
        Some("json_schema") => {
            let schema = format
                .get("json_schema")
                .and_then(|s| s.get("schema"))
                .filter(|s| s.is_object())
                .ok_or_else(|| AdapterError::invalid_request("response_format.json_schema.schema is required"))?;
            Ok(ResponseFormat::JsonSchema(schema))
        }
        _ => Err(AdapterError::invalid_request(
            "response_format.type must be text, json_object or json_schema",
        )),
    }
}

/// OpenAI `reasoning_effort`; `none` and `minimal` both turn reasoning off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningEffort {
    Off,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    /// The thinking budget, in tokens, for providers that take a budget
    /// rather than an effort: Gemini 2.5's budget for each effort, which
    /// Cohere's reasoning models are given too. `None` when reasoning is off.
    pub fn token_budget(self) -> Option<u32> {
        match self {
            ReasoningEffort::Off => None,
            ReasoningEffort::Low => Some(1024),
            ReasoningEffort::Medium => Some(8192),
            ReasoningEffort::High => Some(24576),
        }
    }
}

/// `reasoning_effort`; `None` when absent or null.
pub fn reasoning_effort(request: &Map<String, Value>) -> Result<Option<ReasoningEffort>, AdapterError> {
    let effort = match request.get("reasoning_effort") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(effort)) => match effort.as_str() {
            "none" | "minimal" => ReasoningEffort::Off,
            "low" => ReasoningEffort::Low,
            "medium" => ReasoningEffort::Medium,
            "high" => ReasoningEffort::High,
            other => {
                return Err(AdapterError::invalid_request(format!(
                    "reasoning_effort '{other}' is not one of none, minimal, low, medium, high"
                )));
            }
        },
        Some(_) => return Err(AdapterError::invalid_request("'reasoning_effort' must be a string")),
    };
    Ok(Some(effort))
}

/// The mock upstream's test directives (`mock`), which an adapter that
/// builds its body from scratch passes on; a real caller never sends them.
pub fn mock_directives(request: &Map<String, Value>) -> Option<&Value> {
    request.get("mock").filter(|v| v.is_object())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorClass;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn reads_numbers_and_the_output_limit() {
        let request = object(json!({"temperature": 1, "top_p": null, "max_tokens": 9, "n": 2, "seed": "x"}));
        assert_eq!(number_as_sent(&request, "temperature").unwrap(), Some(&json!(1)));
        assert_eq!(number(&request, "top_p").unwrap(), None);
        assert!(number(&request, "seed").is_err());
        assert_eq!(max_tokens(&request).unwrap(), Some(9.0));
        let newer = object(json!({"max_tokens": 9, "max_completion_tokens": 7}));
        assert_eq!(max_tokens(&newer).unwrap(), Some(7.0));
        let err = require_one_choice(&request, "the X adapter").unwrap_err();
        assert_eq!(
            err.message,
            "the X adapter returns one choice per request: 'n' must be 1"
        );
        assert!(require_one_choice(&object(json!({"n": 1})), "X").is_ok());
    }

    #[test]
    fn reads_the_body_messages_and_stop() {
        assert!(request_object(b"[1]").is_err());
        let request = request_object(br#"{"messages": [{"role": "user"}], "stop": "x"}"#).unwrap();
        assert_eq!(messages(&request).unwrap().len(), 1);
        assert_eq!(stop_sequences(&request).unwrap(), ["x"]);
        assert!(messages(&object(json!({"messages": {}}))).is_err());
        assert_eq!(
            stop_sequences(&object(json!({"stop": ["a", "b"]}))).unwrap(),
            ["a", "b"]
        );
        assert!(stop_sequences(&object(json!({"stop": ["a", 1]}))).is_err());
        assert!(stop_sequences(&object(json!({"stop": 1}))).is_err());
    }

    #[test]
    fn reads_tool_choice_response_format_and_effort() {
        let choice = |c: Value| tool_choice(&object(json!({ "tool_choice": c }))).map(|c| format!("{c:?}"));
        assert_eq!(choice(json!("required")).unwrap(), "Some(Required)");
        assert_eq!(
            choice(json!({"type": "function", "function": {"name": "f"}})).unwrap(),
            "Some(Function(\"f\"))"
        );
        assert_eq!(choice(Value::Null).unwrap(), "None");
        for bad in [json!("any"), json!({"function": {}}), json!(1)] {
            assert_eq!(choice(bad).unwrap_err().class, ErrorClass::InvalidRequest);
        }

        let format = |f: Value| response_format(&object(json!({ "response_format": f }))).map(|f| format!("{f:?}"));
        assert_eq!(format(json!({"type": "text"})).unwrap(), "Text");
        assert_eq!(format(json!({"type": "json_object"})).unwrap(), "JsonObject");
        let schema = json!({"type": "json_schema", "json_schema": {"schema": {"type": "object"}}});
        assert_eq!(
            format(schema).unwrap(),
            format!("JsonSchema({:?})", json!({"type": "object"}))
        );
        assert!(format(json!({"type": "json_schema", "json_schema": {}})).is_err());
        assert!(format(json!({"type": "xml"})).is_err());

        let effort = |e: Value| reasoning_effort(&object(json!({ "reasoning_effort": e })));
        assert_eq!(effort(json!("minimal")).unwrap(), Some(ReasoningEffort::Off));
        assert_eq!(effort(json!("high")).unwrap().unwrap().token_budget(), Some(24576));
        assert!(effort(json!("max")).is_err());
        assert!(effort(json!(1)).is_err());
    }
}
