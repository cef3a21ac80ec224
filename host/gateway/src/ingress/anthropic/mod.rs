//! `POST /v1/messages`: Anthropic's Messages API, in its request, answer,
//! stream and error shapes, served by any provider through the chat pipeline
//! (docs/ingress.md). `request` translates the request into a chat body,
//! this module the whole answer and errors, `stream` the streamed answer.
//!
//! A candidate whose adapter takes `anthropic-messages` natively (WIT
//! 0.2.0, the built-in `anthropic` adapter) gets the caller's body instead,
//! with only the gateway's fields removed, and its answer comes back as
//! Anthropic sent it, with `provider`, `service` and `usage.cost` added
//! (`crate::native`): `cache_control`, `thinking` and `document`
//! blocks pass both ways. A request with `document` blocks can only be
//! served natively.

mod count;
mod request;
mod stream;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{Counts, first_choice, json_response, read_object, render_with_cost};
use crate::DataPlane;
use crate::chat;
use crate::http::{chat_sse, sse_response};
use crate::native::ANTHROPIC_MESSAGES;
use crate::pipeline::{Answer, CacheUse, CallSite, ChatCall, Completion, NativeRequest, Operation, StreamFailure};
use request::to_chat_form;
use tollgate_identity::auth::Caller;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// Request fields that are the gateway's own, not Anthropic's: removed from
/// the body an adapter takes natively.
const GATEWAY_FIELDS: [&str; 5] = ["models", "fallbacks", "continuation", "provider", "session_id"];

/// Request headers a provider taking Messages natively gets as the caller
/// sent them: `anthropic-beta` turns on what beta body fields
/// (`context_management`, …) ask for. The adapter sets its own
/// `anthropic-version`.
const FORWARDED_HEADERS: [&str; 1] = ["anthropic-beta"];

/// The caller's Messages request as a provider taking it natively gets it:
/// unchanged but for the gateway's own fields (the adapter sets the model)
/// and system messages, which are folded into `system`.
fn native_body(request: &Map<String, Value>) -> Bytes {
    let mut body = request.clone();
    for field in GATEWAY_FIELDS {
        body.remove(field);
    }
    fold_system_messages(&mut body);
    Bytes::from(serde_json::to_vec(&body).expect("JSON values serialise"))
}

/// Moves `{"role": "system"}` messages into the top-level `system`, as text
/// blocks after the caller's own, in order: the Messages API takes system
/// text only there. Turns that end up adjacent with the same role are left
/// so; the Messages API joins consecutive turns of one role itself. A body
/// whose `system` or system messages are malformed is left for the chat
/// form's checks to refuse.
fn fold_system_messages(body: &mut Map<String, Value>) {
    let Some(Value::Array(messages)) = body.get_mut("messages") else {
        return;
    };
    let is_system = |m: &Value| m.get("role").and_then(Value::as_str) == Some("system");
    if !messages.iter().any(is_system) {
        return;
    }
    let mut folded = Vec::new();
    for message in messages.iter().filter(|m| is_system(m)) {
        match message.get("content") {
            Some(Value::String(text)) if !text.is_empty() => folded.push(json!({"type": "text", "text": text})),
            Some(Value::String(_)) => {}
            Some(Value::Array(blocks)) => folded.extend(blocks.iter().cloned()),
            _ => return,
        }
    }
    messages.retain(|m| !is_system(m));
    let mut system = match body.remove("system") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) if text.is_empty() => Vec::new(),
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(blocks)) => blocks,
        Some(other) => {
            body.insert("system".into(), other);
            return;
        }
    };
    system.extend(folded);
    body.insert("system".into(), Value::Array(system));
}

/// The caller's [`FORWARDED_HEADERS`], each one value (repeats joined by a
/// comma, as HTTP reads them).
fn forwarded_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    FORWARDED_HEADERS
        .iter()
        .filter_map(|name| {
            let values: Vec<&str> = headers.get_all(*name).iter().filter_map(|v| v.to_str().ok()).collect();
            (!values.is_empty()).then(|| (name.to_string(), values.join(",")))
        })
        .collect()
}

/// 404 `model_not_found` for a `model` the catalog does not have, before
/// any check that depends on the model: an unknown model is named as such,
/// not reported as a body the model could not take. (The chat pipeline
/// resolves `models` and reports a malformed `model`.)
fn known_model(data: &DataPlane, request: &Map<String, Value>) -> Result<(), ApiError> {
    match request.get("model").and_then(Value::as_str) {
        Some(model) if !model.is_empty() && data.routes().catalog.resolve(model).is_none() => {
            Err(ApiError::model_not_found(model))
        }
        _ => Ok(()),
    }
}

pub async fn messages(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let caller = caller?;
        let site = CallSite::top(&request_id, StreamFailure::Status);
        let request = read_object(&data, &site, &caller, body, "a Messages request").await?;
        let model = request.get("model").and_then(Value::as_str).map(str::to_string);
        if let Err(error) = known_model(&data, &request) {
            return Err(chat::refused(&data, &site, &caller, model.as_deref(), error).await);
        }
        let native_body = native_body(&request);
        let chat = match to_chat_form(request) {
            Ok(chat) => chat,
            Err(error) => {
                return Err(chat::refused(&data, &site, &caller, model.as_deref(), error).await);
            }
        };
        let bytes = Bytes::from(serde_json::to_vec(&chat.body).expect("JSON values serialise"));
        let native = NativeRequest {
            dialect: ANTHROPIC_MESSAGES,
            body: native_body,
            required: chat.native_only,
            headers: forwarded_headers(&headers),
        };
        let call = ChatCall {
            cache: CacheUse::from_header(
                headers
                    .get(axum::http::header::CACHE_CONTROL)
                    .and_then(|v| v.to_str().ok()),
            ),
            body: bytes,
            native: Some(native),
        };
        // An adapter that takes Messages natively answers in Anthropic's
        // shape already, with the gateway's metadata: relayed as it is.
        Ok(match data.run(Operation::Chat(call), &caller, site).await? {
            Answer::Whole(completion) if completion.native => {
                json_response(StatusCode::OK, completion.render(), &request_id)
            }
            Answer::Whole(completion) => json_response(StatusCode::OK, from_chat(completion), &request_id),
            Answer::Stream(chat) if chat.native => {
                sse_response(axum::body::Body::from_stream(chat_sse(chat)), &request_id)
            }
            Answer::Stream(chat) => stream::respond(chat, &request_id),
            Answer::Media(_) => unreachable!("a chat answer is JSON or a stream"),
        })
    }
    .await;
    answer.unwrap_or_else(|error: ApiError| error_response(&error, &request_id))
}

/// `POST /v1/messages/count_tokens`: the prompt's `input_tokens`, asked of
/// the provider when the model's adapter takes Messages natively (exact),
/// else estimated (see [`count`]).
pub async fn count_tokens(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let caller = caller?;
        let site = CallSite::top(&request_id, StreamFailure::Status);
        let request = read_object(&data, &site, &caller, body, "a count_tokens request").await?;
        known_model(&data, &request)?;
        count::count(&data, &request_id, request, forwarded_headers(&headers)).await
    }
    .await;
    answer.unwrap_or_else(|error: ApiError| error_response(&error, &request_id))
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
fn from_chat(completion: Completion) -> Vec<u8> {
    let cost = completion.service.cost();
    let counts = Counts::billed(&completion.service);
    let request_id = completion.service.request_id.clone();
    let mut object = completion.object;
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
    let service = completion.service.take_block(&mut object);
    out.insert("service".into(), service.unwrap_or(Value::Null));
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
        let usage = tollgate_plugin_host::Usage {
            input: 10,
            output: 3,
            cache_read: Some(4),
            cache_write: None,
            reasoning: None,
        };
        let answer = Completion {
            object: object.as_object().unwrap().clone(),
            service: super::super::tests::service(250, Some(usage)),
            native: false,
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

    #[test]
    fn a_native_body_folds_system_messages_into_system() {
        let request = json!({"model": "a/b", "max_tokens": 9, "models": ["c/d"], "system": "first",
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "system", "content": [{"type": "text", "text": "terse", "cache_control": {"type": "ephemeral"}}]},
                         {"role": "user", "content": "go"}, {"role": "system", "content": "last"}]});
        let body: Value = serde_json::from_slice(&native_body(request.as_object().unwrap())).unwrap();
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "first"},
            {"type": "text", "text": "terse", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "last"}])
        );
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": "hi"}, {"role": "user", "content": "go"}])
        );
        assert!(body.get("models").is_none());
        let plain = json!({"model": "a/b", "system": "s", "messages": [{"role": "user", "content": "hi"}]});
        let body: Value = serde_json::from_slice(&native_body(plain.as_object().unwrap())).unwrap();
        assert_eq!(body["system"], "s");
    }

    #[test]
    fn forwards_the_beta_header_only() {
        let mut headers = HeaderMap::new();
        headers.append("anthropic-beta", "context-management-2025-06-27".parse().unwrap());
        headers.append("anthropic-beta", "mid-conversation-system-2026-04-07".parse().unwrap());
        headers.append("x-api-key", "secret".parse().unwrap());
        assert_eq!(
            forwarded_headers(&headers),
            [(
                "anthropic-beta".to_string(),
                "context-management-2025-06-27,mid-conversation-system-2026-04-07".to_string()
            )]
        );
    }
}
