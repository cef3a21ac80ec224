//! `POST /v1/messages`: Anthropic's Messages API, in its request, answer,
//! stream and error shapes, served by any provider through the chat pipeline
//! (docs/ingress.md). `request` translates the request into a chat body,
//! this module the whole answer and errors, `stream` the streamed answer.
//!
//! A candidate whose adapter takes `anthropic-messages` natively (WIT
//! 0.2.0, the built-in `anthropic` adapter) gets the caller's body instead,
//! with only the gateway's fields removed, and its answer comes back as
//! Anthropic sent it, with `provider`, `service` and `usage.cost` added
//! (`data_plane::native`): `cache_control`, `thinking` and `document`
//! blocks pass both ways. A request with `document` blocks can only be
//! served natively.

mod request;
mod stream;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{ChatAnswer, Counts, first_choice, json_response, read_object, render_with_cost, whole_answer};
use crate::auth::Caller;
use crate::data_plane::DataPlane;
use crate::data_plane::chat::{self, NativeAnswer, NativeRequest};
use crate::data_plane::native::ANTHROPIC_MESSAGES;
use crate::error::ApiError;
use crate::server::RequestId;
use request::to_chat_form;

/// Request fields that are the gateway's own, not Anthropic's: removed from
/// the body an adapter takes natively.
const GATEWAY_FIELDS: [&str; 3] = ["models", "fallbacks", "continuation"];

/// The caller's Messages request as a provider taking it natively gets it:
/// unchanged but for the gateway's own fields (the adapter sets the model).
fn native_body(request: &Map<String, Value>) -> Bytes {
    let mut body = request.clone();
    for field in GATEWAY_FIELDS {
        body.remove(field);
    }
    Bytes::from(serde_json::to_vec(&body).expect("JSON values serialise"))
}

pub async fn messages(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    caller: Result<Caller, ApiError>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let caller = caller?;
        let request = read_object(&data, &request_id, &caller, body, "a Messages request").await?;
        let stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let model = request.get("model").and_then(Value::as_str).map(str::to_string);
        let native_body = native_body(&request);
        let chat = match to_chat_form(request) {
            Ok(chat) => chat,
            Err(error) => {
                return Err(chat::refused(&data, &request_id, None, &caller, model.as_deref(), error).await);
            }
        };
        let bytes = Bytes::from(serde_json::to_vec(&chat.body).expect("JSON values serialise"));
        let native = NativeRequest {
            dialect: ANTHROPIC_MESSAGES,
            body: native_body,
            required: chat.native_only,
        };
        let response = chat::translated_or_native(&data, &request_id, &caller, bytes, native).await?;
        if response.extensions().get::<NativeAnswer>().is_some() {
            // An adapter that takes Messages natively answered: the body (or
            // stream) is already Anthropic's, with the gateway's metadata.
            return Ok(response);
        }
        if stream {
            return Ok(stream::respond(response, &request_id));
        }
        let answer = whole_answer(response).await?;
        Ok(json_response(StatusCode::OK, from_chat(answer), &request_id))
    }
    .await;
    answer.unwrap_or_else(|error: ApiError| error_response(&error, &request_id))
}

/// `POST /v1/messages/count_tokens`. No adapter can ask its provider for a
/// count (the adapter contract has no such call), and a local guess would be
/// a number the caller could mistake for the provider's, so it is refused.
pub async fn count_tokens(request_id: RequestId) -> Response {
    let error = ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "not_supported",
        "Token counting is not supported by this gateway: no provider adapter can count tokens. \
         The usage of each answer states the tokens billed.",
    );
    error_response(&error, &request_id)
}

/// An error in Anthropic's shape: `{"type":"error","error":{"type","message"},
/// "request_id"}`, plus the gateway's `code` and `service` (request id and
/// attempts), with the status and headers the chat API would give.
pub fn error_response(error: &ApiError, request_id: &RequestId) -> Response {
    let mut service = json!({ "request_id": request_id.0 });
    if let Some(attempts) = &error.attempts {
        service["attempts"] = attempts.clone();
    }
    let body = json!({
        "type": "error",
        "error": { "type": error_type(error), "message": error.message, "code": error.code },
        "request_id": request_id.0,
        "service": service,
    });
    let mut response = json_response(error.status, body.to_string().into_bytes(), request_id);
    super::error_headers(&mut response, error, request_id);
    response
}

/// Anthropic's error type for a status, which its SDKs map to exception classes.
pub fn error_type(error: &ApiError) -> &'static str {
    match error.status.as_u16() {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// A chat finish reason → Anthropic's stop reason.
pub(super) fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("tool_calls" | "function_call") => "tool_use",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    }
}

/// `msg_…`: the Anthropic id when the answer came from Anthropic, else one
/// made from the chat id.
pub(super) fn message_id(chat_id: Option<&str>, request_id: &str) -> String {
    let id = chat_id.unwrap_or(request_id);
    let id = id.strip_prefix("chatcmpl-").unwrap_or(id);
    if id.starts_with("msg_") {
        id.to_string()
    } else {
        format!("msg_{id}")
    }
}

/// Anthropic's usage object from the billed counts: `input_tokens` excludes
/// the tokens read from or written to the cache.
pub(super) fn usage(counts: &Counts) -> Map<String, Value> {
    let usage = json!({
        "input_tokens": counts.uncached_prompt(),
        "output_tokens": counts.completion,
        "cache_read_input_tokens": counts.cache_read,
        "cache_creation_input_tokens": counts.cache_write,
    });
    let Value::Object(usage) = usage else { unreachable!() };
    usage
}

/// A chat completion → a Messages `message`, with `provider`, `service` and
/// `usage.cost`.
fn from_chat(answer: ChatAnswer) -> Vec<u8> {
    let ChatAnswer { mut object, cost } = answer;
    let choice = first_choice(&object).cloned().unwrap_or(Value::Null);
    let message = &choice["message"];
    let mut content = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        let input: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
        content.push(json!({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": input}));
    }
    let counts = Counts::of(&object);
    let request_id = object["service"]["request_id"].as_str().unwrap_or_default().to_string();
    let mut out = Map::new();
    out.insert(
        "id".into(),
        Value::String(message_id(object.get("id").and_then(Value::as_str), &request_id)),
    );
    out.insert("type".into(), json!("message"));
    out.insert("role".into(), json!("assistant"));
    out.insert("model".into(), object.remove("model").unwrap_or(Value::Null));
    out.insert("content".into(), Value::Array(content));
    out.insert(
        "stop_reason".into(),
        json!(stop_reason(choice["finish_reason"].as_str())),
    );
    out.insert("stop_sequence".into(), Value::Null);
    out.insert("usage".into(), Value::Object(usage(&counts)));
    out.insert("provider".into(), object.remove("provider").unwrap_or(Value::Null));
    out.insert("service".into(), object.remove("service").unwrap_or(Value::Null));
    render_with_cost(out, cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_the_messages_shape() {
        let object = json!({
            "id": "chatcmpl-abc", "model": "gpt", "provider": "p",
            "choices": [{"message": {"content": "hi", "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": "{\"a\":1}"}}]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}},
            "service": {"request_id": "req_1", "cost_usd": "0.000000250"},
        });
        let answer = ChatAnswer {
            object: object.as_object().unwrap().clone(),
            cost: tollgate_core::money::Nanos(250),
        };
        let out: Value = serde_json::from_slice(&from_chat(answer)).unwrap();
        assert_eq!(out["id"], "msg_abc");
        assert_eq!(
            out["content"][1],
            json!({"type": "tool_use", "id": "c1", "name": "w", "input": {"a": 1}})
        );
        assert_eq!(out["stop_reason"], "tool_use");
        assert_eq!(out["usage"]["input_tokens"], 6);
        assert_eq!(out["usage"]["cache_read_input_tokens"], 4);
        assert_eq!(out["usage"]["cost"].to_string(), "2.5e-7");
        assert_eq!(out["provider"], "p");
    }
}
