//! Writing a translated whole answer as one OpenAI `chat.completion`: one
//! choice, named as [`ChunkWriter`](crate::stream::ChunkWriter) names a
//! stream's chunks, with its usage. Reading the provider's answer stays in
//! the adapter.

use serde_json::{Value, json};

use crate::{AdapterError, CallContext, ResponseHead, Translated, Usage, openai, time};

/// What an adapter read from its provider's whole answer.
#[derive(Debug, Clone, Default)]
pub struct Answer<'a> {
    /// The provider's id for the answer; the completion is
    /// `chatcmpl-{id}`, else `chatcmpl-{request id}`.
    pub id: Option<&'a str>,
    /// The model that answered; else the context's upstream model.
    pub model: Option<&'a str>,
    /// When the answer was made, in Unix seconds; else the response's
    /// `date` header, else 0 (adapters have no clock).
    pub created: Option<u64>,
    /// The message text. `None`, or empty text beside tool calls, is
    /// `content: null`, as OpenAI answers a bare tool call.
    pub content: Option<String>,
    /// `tool_calls[]` entries, see [`tool_call`].
    pub tool_calls: Vec<Value>,
    /// Also writes `refusal: null` in the message, as OpenAI's own answers
    /// do; adapters whose answers always had it keep it.
    pub null_refusal: bool,
    pub finish_reason: &'static str,
    pub usage: Option<Usage>,
}

/// The `chat.completion` for `answer`, and its usage.
pub fn completion(ctx: &CallContext, head: &ResponseHead, answer: Answer<'_>) -> Result<Translated, AdapterError> {
    let content = match answer.content {
        Some(text) if !text.is_empty() || answer.tool_calls.is_empty() => Value::String(text),
        _ => Value::Null,
    };
    let mut message = json!({ "role": "assistant", "content": content });
    if answer.null_refusal {
        message["refusal"] = Value::Null;
    }
    if !answer.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(answer.tool_calls);
    }
    let created = answer
        .created
        .or_else(|| openai::header(&head.headers, "date").and_then(time::http_date))
        .unwrap_or(0);
    let model = answer.model.filter(|m| !m.is_empty()).unwrap_or(&ctx.upstream_model);
    let mut completion = json!({
        "id": completion_id(ctx, answer.id),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": answer.finish_reason,
        }],
    });
    if let Some(usage) = &answer.usage {
        completion["usage"] = openai::usage_json(usage);
    }
    let body = serde_json::to_vec(&completion).map_err(|e| AdapterError::internal(e.to_string()))?;
    Ok(Translated {
        body,
        usage: answer.usage,
    })
}

/// `chatcmpl-{upstream_id}`, else `chatcmpl-{request id}`.
pub fn completion_id(ctx: &CallContext, upstream_id: Option<&str>) -> String {
    let id = upstream_id.filter(|id| !id.is_empty()).unwrap_or(&ctx.request_id);
    format!("chatcmpl-{id}")
}

/// One `tool_calls[]` entry of an answer's message.
pub fn tool_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } })
}

/// A tool input the provider sent as JSON, as OpenAI's `arguments` text;
/// absent or null is `{}`.
pub fn arguments_text(input: Option<&Value>) -> Result<String, AdapterError> {
    match input {
        None | Some(Value::Null) => Ok("{}".to_owned()),
        Some(input) => serde_json::to_string(input).map_err(|e| AdapterError::internal(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> CallContext {
        CallContext {
            request_id: "req-1".into(),
            upstream_model: "up".into(),
            base_url: "http://x".into(),
            stream: false,
            attempt: 0,
            max_output_tokens: None,
            continuation: None,
        }
    }

    fn head(headers: &[(&str, &str)]) -> ResponseHead {
        ResponseHead {
            status: 200,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn written(head: &ResponseHead, answer: Answer<'_>) -> Value {
        serde_json::from_slice(&completion(&ctx(), head, answer).unwrap().body).unwrap()
    }

    #[test]
    fn writes_defaults_from_the_context_and_date() {
        let answer = Answer {
            content: Some("hi".into()),
            finish_reason: "stop",
            ..Answer::default()
        };
        let head = head(&[("Date", "Tue, 14 Nov 2023 22:13:20 GMT")]);
        assert_eq!(
            written(&head, answer),
            json!({"id": "chatcmpl-req-1", "object": "chat.completion", "created": 1_700_000_000, "model": "up",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                "logprobs": null, "finish_reason": "stop"}]})
        );
    }

    #[test]
    fn writes_upstream_names_tool_calls_and_usage() {
        let usage = Usage {
            input: 3,
            output: 2,
            cache_read: None,
            cache_write: None,
            reasoning: None,
        };
        let answer = Answer {
            id: Some("m1"),
            model: Some("m-2"),
            created: Some(5),
            content: Some(String::new()),
            tool_calls: vec![tool_call("c1", "f", &arguments_text(None).unwrap())],
            null_refusal: true,
            finish_reason: "tool_calls",
            usage: Some(usage),
        };
        let out = completion(&ctx(), &head(&[]), answer).unwrap();
        assert_eq!(out.usage, Some(usage));
        let out: Value = serde_json::from_slice(&out.body).unwrap();
        assert_eq!(
            (&out["id"], &out["model"], &out["created"]),
            (&json!("chatcmpl-m1"), &json!("m-2"), &json!(5))
        );
        assert_eq!(
            out["choices"][0]["message"],
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        );
        assert_eq!(out["usage"]["total_tokens"], 5);
        assert_eq!(completion_id(&ctx(), Some("")), "chatcmpl-req-1");
    }
}
