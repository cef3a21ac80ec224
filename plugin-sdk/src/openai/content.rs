//! Reading a chat-completions request's `messages`: roles, text parts, image
//! URLs and base64 data URLs, assistant tool calls and the ids tool results
//! answer. Errors name the place (`messages[2].content[0]`); what a provider
//! makes of the content stays in the adapter.

use serde_json::{Value, json};

use crate::AdapterError;

/// `messages[i].role`, which is required.
pub fn role(message: &Value, i: usize) -> Result<&str, AdapterError> {
    message
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::invalid_request(format!("messages[{i}].role is required")))
}

/// The error for a role `adapter` (e.g. "the Gemini adapter") has no place for.
pub fn unsupported_role(i: usize, role: &str, adapter: &str) -> AdapterError {
    AdapterError::invalid_request(format!("messages[{i}].role '{role}' is not supported by {adapter}"))
}

/// The texts of a string, or of the `text` and `refusal` parts of an array;
/// none for `null`. Any other part is refused.
pub fn texts(content: &Value, i: usize) -> Result<Vec<&str>, AdapterError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(text) => Ok(vec![text.as_str()]),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for (j, part) in parts.iter().enumerate() {
                let key = match part.get("type").and_then(Value::as_str) {
                    Some("text") => "text",
                    Some("refusal") => "refusal",
                    _ => {
                        return Err(AdapterError::invalid_request(format!(
                            "messages[{i}].content[{j}]: only text parts are allowed here"
                        )));
                    }
                };
                out.extend(part.get(key).and_then(Value::as_str));
            }
            Ok(out)
        }
        _ => Err(AdapterError::invalid_request(format!(
            "messages[{i}].content must be a string or an array"
        ))),
    }
}

/// The error for a content part `adapter` cannot send; `at` is the part
/// (`messages[i].content[j]`).
pub fn unsupported_part(at: &str, kind: Option<&str>, adapter: &str) -> AdapterError {
    AdapterError::invalid_request(format!(
        "{at}: content part type {} is not supported by {adapter}",
        kind.unwrap_or("(missing)")
    ))
}

/// The URL of an `image_url` part (`image_url.url`, or a bare string
/// `image_url`); `at` is the part.
pub fn image_url<'a>(part: &'a Value, at: &str) -> Result<&'a str, AdapterError> {
    part.get("image_url")
        .and_then(|u| u.get("url").or(Some(u)))
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::invalid_request(format!("{at}.image_url.url is required")))
}

/// A `data:` URL split into its media type and base64 data; `None` for any
/// other URL. Data URLs that are not base64 are refused.
pub fn base64_data_url<'a>(url: &'a str, at: &str) -> Result<Option<(&'a str, &'a str)>, AdapterError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(None);
    };
    let (meta, data) = rest
        .split_once(',')
        .ok_or_else(|| AdapterError::invalid_request(format!("{at}: malformed data URL")))?;
    let media_type = meta
        .strip_suffix(";base64")
        .ok_or_else(|| AdapterError::invalid_request(format!("{at}: only base64 data URLs are supported")))?;
    Ok(Some((media_type, data)))
}

/// The `id` of an assistant tool call, which is required; `at` is the call
/// (`messages[i].tool_calls[j]`).
pub fn tool_call_id<'a>(call: &'a Value, at: &str) -> Result<&'a str, AdapterError> {
    call.get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| AdapterError::invalid_request(format!("{at}.id is required")))
}

/// The function an assistant tool call (or legacy `function_call`) calls.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionCall<'a> {
    pub name: &'a str,
    /// The object `arguments` encodes: providers take arguments as JSON,
    /// not as OpenAI's JSON text.
    pub arguments: Value,
}

/// Reads a tool call's `function`; `at` is the call. Absent, null or blank
/// `arguments` are `{}`, and an object sent in place of its text is taken
/// too; anything but an object is refused.
pub fn function_call<'a>(function: &'a Value, at: &str) -> Result<FunctionCall<'a>, AdapterError> {
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::invalid_request(format!("{at}.function.name is required")))?;
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => Some(json!({})),
        Some(Value::String(text)) if text.trim().is_empty() => Some(json!({})),
        Some(Value::String(text)) => serde_json::from_str::<Value>(text).ok().filter(Value::is_object),
        Some(object @ Value::Object(_)) => Some(object.clone()),
        Some(_) => None,
    }
    .ok_or_else(|| AdapterError::invalid_request(format!("{at}.function.arguments must be a JSON object")))?;
    Ok(FunctionCall { name, arguments })
}

/// The `tool_call_id` of a `tool` message, which must name one of
/// `earlier_calls`: providers refuse a result they cannot match to its call.
pub fn tool_result_id<'a>(message: &'a Value, i: usize, earlier_calls: &[String]) -> Result<&'a str, AdapterError> {
    let id = message
        .get("tool_call_id")
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::invalid_request(format!("messages[{i}].tool_call_id is required")))?;
    if !earlier_calls.iter().any(|call| call == id) {
        return Err(AdapterError::invalid_request(format!(
            "messages[{i}]: no earlier assistant tool call has id '{id}'"
        )));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_roles_and_texts() {
        assert_eq!(role(&json!({"role": "user"}), 0).unwrap(), "user");
        assert_eq!(role(&json!({}), 3).unwrap_err().message, "messages[3].role is required");
        let parts = json!([{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "b"}, {"type": "text"}]);
        assert_eq!(texts(&parts, 0).unwrap(), ["a", "b"]);
        assert_eq!(texts(&json!("s"), 0).unwrap(), ["s"]);
        assert!(texts(&Value::Null, 0).unwrap().is_empty());
        assert!(texts(&json!([{"type": "image_url"}]), 0).is_err());
        assert!(texts(&json!(1), 0).is_err());
    }

    #[test]
    fn reads_image_and_data_urls() {
        let part = json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}});
        let url = image_url(&part, "at").unwrap();
        assert_eq!(base64_data_url(url, "at").unwrap(), Some(("image/png", "AA")));
        assert_eq!(
            image_url(&json!({"image_url": "https://x"}), "at").unwrap(),
            "https://x"
        );
        assert!(image_url(&json!({}), "at").is_err());
        assert_eq!(base64_data_url("https://x/a.png", "at").unwrap(), None);
        assert!(base64_data_url("data:image/png,AA", "at").is_err());
        assert!(base64_data_url("data:image/png;base64", "at").is_err());
    }

    #[test]
    fn reads_tool_calls_and_results() {
        let call = json!({"id": "c1", "function": {"name": "f", "arguments": "{\"a\":1}"}});
        assert_eq!(tool_call_id(&call, "at").unwrap(), "c1");
        assert!(tool_call_id(&json!({"id": ""}), "at").is_err());
        let function = function_call(&call["function"], "at").unwrap();
        assert_eq!((function.name, function.arguments), ("f", json!({"a": 1})));
        for blank in [json!({"name": "f"}), json!({"name": "f", "arguments": " "})] {
            assert_eq!(function_call(&blank, "at").unwrap().arguments, json!({}));
        }
        let object = json!({"name": "f", "arguments": {"b": 2}});
        assert_eq!(function_call(&object, "at").unwrap().arguments, json!({"b": 2}));
        for bad in [json!({"arguments": "{}"}), json!({"name": "f", "arguments": "[1]"})] {
            assert!(function_call(&bad, "at").is_err(), "{bad}");
        }

        let result = json!({"role": "tool", "tool_call_id": "c1"});
        assert_eq!(tool_result_id(&result, 1, &["c1".to_owned()]).unwrap(), "c1");
        assert!(tool_result_id(&result, 1, &[]).is_err());
        assert!(tool_result_id(&json!({"role": "tool"}), 1, &["c1".to_owned()]).is_err());
    }
}
