//! The OpenAI chat-completions request → the Converse request: URL and body.

use serde::de::DeserializeOwned;
use serde_json::Value;
use tollgate_plugin_sdk::json::RawObject;
use tollgate_plugin_sdk::{AdapterError, CallContext};

use crate::converse::{Block, Body, InferenceConfig};
use crate::{messages, tools};

/// The upstream request and what the answer's translation needs to know.
#[derive(Debug)]
pub struct Prepared {
    pub url: String,
    pub body: Vec<u8>,
    /// The forced structured-output tool, whose input is the answer's content.
    pub response_tool: Option<String>,
    /// Whitespace cut from the end of the continuation prefill (Bedrock's
    /// Anthropic models reject a final assistant turn ending in whitespace);
    /// cut from the start of the answer too, so the caller does not read it twice.
    pub prefill_whitespace: String,
}

/// What the answer's translation (whole or streamed) needs from the request:
/// the fields of [`Prepared`] after the URL and body.
#[derive(Debug, Default)]
pub struct Shape {
    pub response_tool: Option<String>,
    pub prefill_whitespace: String,
}

/// Builds the Converse request for `ctx` from the caller's `openai_body`.
/// Fields Converse has no place for (`user`, `seed`, penalties, `logprobs`, …)
/// are dropped, as are the gateway's own.
pub fn prepare(ctx: &CallContext, openai_body: &[u8]) -> Result<Prepared, AdapterError> {
    let url = url(ctx)?;
    let request = RawObject::parse_slice(openai_body)
        .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
    if field::<Value>(&request, "n")?
        .and_then(|n| n.as_u64())
        .is_some_and(|n| n > 1)
    {
        return Err(AdapterError::invalid_request(
            "Bedrock returns one choice per request: 'n' must be 1",
        ));
    }
    let list: Vec<Value> =
        field(&request, "messages")?.ok_or_else(|| AdapterError::invalid_request("'messages' must be an array"))?;
    let mut conversation = messages::convert(&list)?;
    let mut prefill_whitespace = String::new();
    if let Some(partial) = &ctx.continuation {
        let kept = partial.trim_end();
        prefill_whitespace = partial[kept.len()..].to_owned();
        if !kept.is_empty() {
            conversation.push_turn("assistant", vec![Block::Text(kept.to_owned())]);
        }
    }
    let plan = tools::plan(&request, &conversation)?;
    let config = inference_config(&request, ctx.max_output_tokens)?;
    let body = Body {
        messages: conversation.messages,
        system: conversation.system,
        inference_config: (!config.is_empty()).then_some(config),
        tool_config: plan.tool_config,
    };
    let body = serde_json::to_vec(&body).map_err(|e| AdapterError::internal(e.to_string()))?;
    Ok(Prepared {
        url,
        body,
        response_tool: plan.response_tool,
        prefill_whitespace,
    })
}

/// The member `key` parsed as `T`; `None` when absent or `null`.
fn field<T: DeserializeOwned>(request: &RawObject<'_>, key: &str) -> Result<Option<T>, AdapterError> {
    request
        .get_non_null(key)
        .map(|raw| serde_json::from_str(raw.get()))
        .transpose()
        .map_err(|e| AdapterError::invalid_request(format!("'{key}' is malformed: {e}")))
}

/// `{base_url}/model/{modelId}/converse[-stream]`, the model id
/// percent-encoded as one path segment (`:` → `%3A`, and `/` in ARNs → `%2F`),
/// as the AWS SDKs send it.
fn url(ctx: &CallContext) -> Result<String, AdapterError> {
    if ctx.upstream_model.is_empty() {
        return Err(AdapterError::invalid_request("the Bedrock model id is empty"));
    }
    let operation = if ctx.stream { "converse-stream" } else { "converse" };
    Ok(format!(
        "{}/model/{}/{operation}",
        ctx.base_url.trim_end_matches('/'),
        encode_segment(&ctx.upstream_model)
    ))
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len() + 8);
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `inferenceConfig` from the sampling fields.
fn inference_config(request: &RawObject<'_>, default_max: Option<u32>) -> Result<InferenceConfig, AdapterError> {
    // `max_completion_tokens` replaced `max_tokens` in OpenAI's API.
    let requested = match field::<Value>(request, "max_completion_tokens")? {
        Some(value) => Some(value),
        None => field::<Value>(request, "max_tokens")?,
    };
    let max_tokens = match requested {
        Some(value) => Some(value.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
            AdapterError::invalid_request("max_tokens / max_completion_tokens must be a positive integer")
        })?),
        None => default_max.map(u64::from),
    };
    let number = |key: &str| -> Result<Option<Value>, AdapterError> {
        match field::<Value>(request, key)? {
            Some(value) if !value.is_number() => {
                Err(AdapterError::invalid_request(format!("'{key}' must be a number")))
            }
            other => Ok(other),
        }
    };
    let stop_sequences = match field::<Value>(request, "stop")? {
        None => Vec::new(),
        Some(Value::String(stop)) => vec![stop],
        Some(Value::Array(stops)) => stops
            .into_iter()
            .map(|s| match s {
                Value::String(s) => Ok(s),
                _ => Err(AdapterError::invalid_request(
                    "'stop' must be a string or an array of strings",
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(AdapterError::invalid_request(
                "'stop' must be a string or an array of strings",
            ));
        }
    };
    Ok(InferenceConfig {
        max_tokens,
        temperature: number("temperature")?,
        top_p: number("top_p")?,
        stop_sequences,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(model: &str, stream: bool) -> CallContext {
        CallContext {
            request_id: "r".into(),
            upstream_model: model.into(),
            base_url: "https://bedrock-runtime.us-east-1.amazonaws.com/".into(),
            stream,
            attempt: 0,
            max_output_tokens: Some(100),
            continuation: None,
        }
    }

    #[test]
    fn model_ids_are_one_encoded_segment() {
        let url = url(&ctx("anthropic.claude-3-5-haiku-20241022-v1:0", false)).unwrap();
        assert_eq!(
            url,
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
        );
        let url = super::url(&ctx(
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x.y",
            true,
        ))
        .unwrap();
        assert!(url.ends_with(
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.x.y/converse-stream"
        ));
        assert!(super::url(&ctx("", false)).is_err());
    }

    use serde_json::json;

    fn try_config(request: Value, default_max: Option<u32>) -> Result<InferenceConfig, AdapterError> {
        let text = request.to_string();
        inference_config(&RawObject::parse(&text).unwrap(), default_max)
    }

    fn config(request: Value, default_max: Option<u32>) -> Option<Value> {
        let config = try_config(request, default_max).unwrap();
        (!config.is_empty()).then(|| serde_json::to_value(config).unwrap())
    }

    #[test]
    fn inference_config_fields() {
        assert_eq!(config(json!({}), None), None);
        assert_eq!(config(json!({}), Some(9)), Some(json!({"maxTokens": 9})));
        assert_eq!(
            config(
                json!({"max_tokens": 5, "max_completion_tokens": 7, "stop": "x", "top_p": 0.5}),
                Some(9)
            ),
            Some(json!({"maxTokens": 7, "topP": 0.5, "stopSequences": ["x"]}))
        );
        assert!(try_config(json!({"max_tokens": 0}), None).is_err());
        assert!(try_config(json!({"stop": [1]}), None).is_err());
        assert!(try_config(json!({"temperature": "hot"}), None).is_err());
    }

    #[test]
    fn continuation_is_a_trimmed_prefill() {
        let mut c = ctx("m", true);
        c.continuation = Some("Hello there ".into());
        let prepared = prepare(&c, br#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
        let body: Value = serde_json::from_slice(&prepared.body).unwrap();
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": [{"text": "Hello there"}]})
        );
        assert_eq!(prepared.prefill_whitespace, " ");
    }

    #[test]
    fn n_above_one_is_refused() {
        assert!(prepare(&ctx("m", false), br#"{"messages":[],"n":2}"#).is_err());
        assert!(prepare(&ctx("m", false), br#"{"messages":[],"n":1}"#).is_ok());
        assert!(prepare(&ctx("m", false), br#"[1]"#).is_err());
    }
}
