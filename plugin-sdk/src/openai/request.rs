//! Preparing a caller's chat-completions body for an OpenAI-compatible
//! upstream, and reading its function tools. The body is edited as a raw
//! object, so every field the gateway does not touch passes through byte
//! for byte, in order, including fields added after this was written.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::AdapterError;
use crate::json::{RawObject, is_object};

/// Request fields that belong to the gateway, not to any upstream.
pub const GATEWAY_FIELDS: [&str; 5] = ["models", "fallbacks", "continuation", "provider", "session_id"];

/// Prepare the caller's chat-completions body for an OpenAI-compatible upstream.
///
/// The body must be a JSON object. `model` is set to `upstream_model`; the
/// gateway's own fields ([`GATEWAY_FIELDS`]) are removed. When `stream` is set,
/// `stream: true` is set and `stream_options.include_usage: true` is merged
/// into any existing `stream_options`; otherwise `stream` and `stream_options`
/// are removed (the host expects a single JSON response). When
/// `default_max_tokens` is set and the body has neither `max_tokens` nor
/// `max_completion_tokens`, `max_tokens` is set to it (the gateway's cap, see
/// `CallContext::max_output_tokens`). Every other field is passed through byte
/// for byte, in its original order.
pub fn prepare_request(
    body: &[u8],
    upstream_model: &str,
    stream: bool,
    default_max_tokens: Option<u32>,
) -> Result<Vec<u8>, AdapterError> {
    let mut obj = RawObject::parse_slice(body)
        .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
    prepare_object(&mut obj, upstream_model, stream, default_max_tokens)?;
    Ok(obj.to_vec())
}

/// Appends `{"role": "assistant", "content": partial}` to `messages`: the
/// OpenAI-compatible way to ask a model to continue an answer another upstream
/// started (see `CallContext::continuation`).
pub fn append_continuation(obj: &mut RawObject<'_>, partial: &str) -> Result<(), AdapterError> {
    let internal = |e: serde_json::Error| AdapterError::internal(e.to_string());
    let mut messages: Vec<Box<RawValue>> = match obj.get("messages") {
        Some(raw) => {
            serde_json::from_str(raw.get()).map_err(|_| AdapterError::invalid_request("'messages' must be an array"))?
        }
        None => Vec::new(),
    };
    let message = serde_json::json!({ "role": "assistant", "content": partial });
    messages.push(serde_json::value::to_raw_value(&message).map_err(internal)?);
    let raw = serde_json::value::to_raw_value(&messages).map_err(internal)?;
    obj.insert_raw("messages", Cow::Owned(raw));
    Ok(())
}

/// [`prepare_request`] on an already parsed object, for adapters that edit it
/// further before serializing.
pub fn prepare_object(
    obj: &mut RawObject<'_>,
    upstream_model: &str,
    stream: bool,
    default_max_tokens: Option<u32>,
) -> Result<(), AdapterError> {
    let internal = |e: serde_json::Error| AdapterError::internal(e.to_string());
    for field in GATEWAY_FIELDS {
        obj.remove(field);
    }
    obj.insert("model", upstream_model).map_err(internal)?;
    if let Some(cap) = default_max_tokens
        && obj.get_non_null("max_tokens").is_none()
        && obj.get_non_null("max_completion_tokens").is_none()
    {
        obj.insert("max_tokens", &cap).map_err(internal)?;
    }
    if stream {
        obj.insert_raw("stream", Cow::Owned(raw_true()));
        let mut options = match obj.get("stream_options").filter(|v| is_object(v)) {
            Some(raw) => RawObject::parse(raw.get()).map_err(internal)?.into_owned(),
            None => RawObject::new(),
        };
        options.insert_raw("include_usage", Cow::Owned(raw_true()));
        let raw = RawValue::from_string(
            String::from_utf8(options.to_vec())
                .map_err(|e| AdapterError::internal(format!("stream_options is not UTF-8: {e}")))?,
        )
        .map_err(internal)?;
        obj.insert_raw("stream_options", Cow::Owned(raw));
    } else {
        obj.remove("stream");
        obj.remove("stream_options");
    }
    Ok(())
}

fn raw_true() -> Box<RawValue> {
    RawValue::from_string("true".to_owned()).expect("`true` is valid JSON")
}

/// One `tools[]` entry of a chat-completions request: a function tool.
pub struct FunctionTool<'a> {
    pub name: &'a str,
    pub description: Option<&'a str>,
    /// `function.parameters` as sent (absent or `null` is `None`); adapters
    /// check its shape against what their provider accepts.
    pub parameters: Option<&'a Value>,
    pub strict: bool,
}

impl FunctionTool<'_> {
    /// `parameters` for a provider that requires an object schema: absent
    /// is a function without arguments (an object with no properties), and
    /// anything but an object is refused. `i` is the tool's index in `tools`.
    pub fn object_parameters(&self, i: usize) -> Result<Value, AdapterError> {
        match self.parameters {
            None => Ok(serde_json::json!({"type": "object", "properties": {}})),
            Some(schema @ Value::Object(_)) => Ok(schema.clone()),
            Some(_) => Err(AdapterError::invalid_request(format!(
                "tools[{i}].function.parameters must be a JSON Schema object"
            ))),
        }
    }
}

/// The request's `tools`, which must all be function tools with a name.
/// `provider` names who refuses any other kind, in the error message.
pub fn function_tools<'a>(
    request: &'a serde_json::Map<String, Value>,
    provider: &str,
) -> Result<Vec<FunctionTool<'a>>, AdapterError> {
    let tools = match request.get("tools") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(AdapterError::invalid_request("'tools' must be an array")),
    };
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("function");
        let function = tool.get("function").filter(|_| kind == "function").ok_or_else(|| {
            AdapterError::invalid_request(format!("tools[{i}]: only 'function' tools are supported by {provider}"))
        })?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| AdapterError::invalid_request(format!("tools[{i}].function.name is required")))?;
        out.push(FunctionTool {
            name,
            description: function.get("description").and_then(Value::as_str),
            parameters: function.get("parameters").filter(|p| !p.is_null()),
            strict: function.get("strict").and_then(Value::as_bool) == Some(true),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorClass;
    use serde_json::json;

    fn prepare(body: Value, stream: bool) -> Value {
        let out = prepare_request(body.to_string().as_bytes(), "up-model", stream, None).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn prepare_sets_model_and_strips_gateway_fields() {
        let body = json!({
            "model": "alias", "models": ["a", "b"], "fallbacks": [], "continuation": {"x": 1},
            "provider": {"sort": "price"}, "session_id": "s1",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            "tool_choice": "auto", "response_format": {"type": "json_object"},
            "temperature": 0.7, "x_unknown": [1, 2]
        });
        let out = prepare(body.clone(), false);
        let mut expected = body;
        let map = expected.as_object_mut().unwrap();
        for f in GATEWAY_FIELDS {
            map.remove(f);
        }
        map.insert("model".into(), json!("up-model"));
        assert_eq!(out, expected);
    }

    #[test]
    fn prepare_streaming_merges_stream_options() {
        let out = prepare(
            json!({"model": "m", "messages": [], "stream_options": {"foo": 1, "include_usage": false}}),
            true,
        );
        assert_eq!(out["stream"], json!(true));
        assert_eq!(out["stream_options"], json!({"foo": 1, "include_usage": true}));

        let out = prepare(json!({"messages": [], "stream": false}), true);
        assert_eq!(out["stream"], json!(true));
        assert_eq!(out["stream_options"], json!({"include_usage": true}));
        assert_eq!(out["model"], json!("up-model"));

        let out = prepare(json!({"messages": [], "stream_options": null}), true);
        assert_eq!(out["stream_options"], json!({"include_usage": true}));
    }

    #[test]
    fn prepare_non_streaming_drops_stream_fields() {
        let out = prepare(
            json!({"messages": [], "stream": true, "stream_options": {"include_usage": true}}),
            false,
        );
        assert_eq!(out, json!({"messages": [], "model": "up-model"}));
    }

    #[test]
    fn prepare_keeps_bytes_of_other_fields() {
        let body = br#"{"temperature":1.0,"messages":[{"role":"user","content":"\u00e9"}],"model":"a"}"#;
        let out = prepare_request(body, "b", false, None).unwrap();
        assert_eq!(
            out,
            br#"{"temperature":1.0,"messages":[{"role":"user","content":"\u00e9"}],"model":"b"}"#
        );
    }

    #[test]
    fn prepare_rejects_invalid_bodies() {
        for body in [&b"not json"[..], b"[1]", b"\"s\"", b"", b"{\"a\":1"] {
            let err = prepare_request(body, "m", true, None).unwrap_err();
            assert_eq!(err.class, ErrorClass::InvalidRequest, "{body:?}");
        }
    }
    #[test]
    fn injects_the_gateway_cap_only_when_the_caller_set_none() {
        let bare = br#"{"model":"a/b","messages":[]}"#;
        let out: Value = serde_json::from_slice(&prepare_request(bare, "m", false, Some(77)).unwrap()).unwrap();
        assert_eq!(out["max_tokens"], 77);
        for body in [
            &br#"{"model":"a/b","max_tokens":5}"#[..],
            br#"{"model":"a/b","max_completion_tokens":5}"#,
        ] {
            let out: Value = serde_json::from_slice(&prepare_request(body, "m", false, Some(77)).unwrap()).unwrap();
            assert_ne!(out["max_tokens"], 77, "{out}");
        }
        let out: Value = serde_json::from_slice(&prepare_request(bare, "m", false, None).unwrap()).unwrap();
        assert!(out.get("max_tokens").is_none());
    }

    #[test]
    fn object_parameters_default_to_no_arguments() {
        let request = serde_json::json!({"tools": [
            {"type": "function", "function": {"name": "a"}},
            {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "c", "parameters": []}}
        ]});
        let tools = function_tools(request.as_object().unwrap(), "P").unwrap();
        assert_eq!(
            tools[0].object_parameters(0).unwrap(),
            serde_json::json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            tools[1].object_parameters(1).unwrap(),
            serde_json::json!({"type": "object"})
        );
        assert_eq!(
            tools[2].object_parameters(2).unwrap_err().message,
            "tools[2].function.parameters must be a JSON Schema object"
        );
    }

    #[test]
    fn continuation_appends_an_assistant_message() {
        let body = br#"{"model":"a/b","messages":[{"role":"user","content":"hi"}],"temperature":0.5}"#;
        let mut obj = RawObject::parse_slice(body).unwrap();
        append_continuation(&mut obj, "Hello the").unwrap();
        let out: Value = serde_json::from_slice(&obj.to_vec()).unwrap();
        assert_eq!(
            out["messages"],
            serde_json::json!([{"role":"user","content":"hi"},{"role":"assistant","content":"Hello the"}])
        );
        assert_eq!(out["temperature"], 0.5);
    }
}
