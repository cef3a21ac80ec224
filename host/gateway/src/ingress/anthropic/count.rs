//! `POST /v1/messages/count_tokens`. A model whose adapter takes Messages
//! natively (the `anthropic` adapter) has its provider count: the adapter
//! builds the native Messages request, as for an answer, and the host sends
//! it to the provider's `…/messages/count_tokens` with only the fields a
//! count takes; the figure is the provider's own. Any other model gets an
//! estimate, one token per four bytes of the prompt's chat form (messages
//! and tools as JSON), the rule the gateway bills by when a provider reports
//! no usage. `service.counted_by` says which (`provider` or `estimate`).
//! A count costs nothing and posts nothing.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::native_body;
use super::request::to_chat_form;
use crate::DataPlane;
use crate::attempts::{exchange_error, forward_headers};
use crate::ingress::json_response;
use crate::native::ANTHROPIC_MESSAGES;
use crate::upstream::response_head;
use tollgate_plugin_host::CallContext;
use tollgate_routing::catalog::ModelRoute;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// The request fields Anthropic's count takes; an answer's own settings
/// (`max_tokens`, `stream`, `temperature`, …) it refuses as extra inputs.
const COUNT_FIELDS: [&str; 9] = [
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "mcp_servers",
    "context_management",
    "output_config",
];

/// Largest count answer read from a provider.
const MAX_COUNT_ANSWER: usize = 64 << 10;

pub async fn count(
    data: &Arc<DataPlane>,
    request_id: &RequestId,
    request: Map<String, Value>,
    headers: Vec<(String, String)>,
) -> Result<Response, ApiError> {
    let model = request.get("model").and_then(Value::as_str).unwrap_or_default();
    let route = data.routes().catalog.resolve(model).cloned();
    let native = route.as_ref().is_some_and(|route| {
        data.adapters
            .get(&route.provider.adapter)
            .is_some_and(|adapter| adapter.takes_natively(ANTHROPIC_MESSAGES))
    });
    let (input_tokens, counted_by) = match route.as_ref().filter(|_| native) {
        Some(route) => (counted(data, route, request_id, &request, &headers).await?, "provider"),
        None => (estimated(request)?, "estimate"),
    };
    let body = json!({
        "input_tokens": input_tokens,
        "service": {
            "request_id": request_id.0,
            "model": route.as_ref().map(|r| r.id.as_str()),
            "counted_by": counted_by,
        },
    });
    Ok(json_response(StatusCode::OK, body.to_string().into_bytes(), request_id))
}

/// The estimate: the chat form's messages and tools, a token per four bytes.
/// Built through the same translation as an answer, so what an answer would
/// refuse, a count refuses too.
fn estimated(mut request: Map<String, Value>) -> Result<u64, ApiError> {
    // A count has no output limit; the chat form needs one.
    request.entry("max_tokens").or_insert(json!(1));
    let chat = to_chat_form(request)?.body;
    let prompt = json!({"messages": chat.get("messages"), "tools": chat.get("tools")});
    Ok((prompt.to_string().len() as u64).div_ceil(4).max(1))
}

/// The provider's count, through the model's adapter.
async fn counted(
    data: &DataPlane,
    route: &ModelRoute,
    request_id: &RequestId,
    request: &Map<String, Value>,
    headers: &[(String, String)],
) -> Result<u64, ApiError> {
    let provider = &route.provider;
    if let Some(reason) = provider.unavailable_reason() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "provider_not_configured",
            format!("provider '{}' is not configured: {reason}", provider.id),
        ));
    }
    let adapter = data
        .adapters
        .get(&provider.adapter)
        .ok_or_else(|| ApiError::internal(format!("adapter '{}' is not loaded", provider.adapter)))?;
    let ctx = CallContext {
        request_id: request_id.0.to_string(),
        upstream_model: route.upstream_model.clone(),
        base_url: provider.base_url.clone(),
        stream: false,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    };
    let mut session = adapter
        .open_native(&ctx, ANTHROPIC_MESSAGES, &native_body(request))
        .map_err(|fault| crate::adapter_errors::fault(&fault))?;
    let mut outbound = session.request().map_err(|e| exchange_error(route, e))?;
    outbound.url = count_url(&outbound.url)
        .ok_or_else(|| ApiError::adapter_refused(&provider.adapter, "its Messages URL does not end in /messages"))?;
    outbound.body = count_body(&outbound.body)
        .ok_or_else(|| ApiError::adapter_refused(&provider.adapter, "its Messages body is not a JSON object"))?;
    forward_headers(&mut outbound.headers, headers);
    let response = data.upstream.send(provider, outbound).await?;
    let head = response_head(&response);
    let body = data.upstream.read_body(provider, response, MAX_COUNT_ANSWER).await?;
    if !(200..300).contains(&head.status) {
        let classified = session
            .classify_error(&head, &body)
            .map_err(|fault| crate::adapter_errors::fault(&fault))?;
        return Err(crate::adapter_errors::from_upstream(&provider.id, &classified));
    }
    serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|answer| answer.get("input_tokens").and_then(Value::as_u64))
        .ok_or_else(|| ApiError::upstream_unreachable(&provider.id, "the token count answer has no 'input_tokens'"))
}

/// `…/messages` → `…/messages/count_tokens`, the query kept.
fn count_url(messages_url: &str) -> Option<String> {
    let mut url = url::Url::parse(messages_url).ok()?;
    let path = url.path().trim_end_matches('/');
    if !path.ends_with("/messages") {
        return None;
    }
    let path = format!("{path}/count_tokens");
    url.set_path(&path);
    Some(url.into())
}

/// The adapter's Messages body with only [`COUNT_FIELDS`].
fn count_body(body: &[u8]) -> Option<Vec<u8>> {
    let mut object: Map<String, Value> = serde_json::from_slice(body).ok()?;
    object.retain(|key, _| COUNT_FIELDS.contains(&key.as_str()));
    serde_json::to_vec(&object).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_request_is_the_messages_request_narrowed() {
        assert_eq!(
            count_url("https://api.anthropic.com/v1/messages").as_deref(),
            Some("https://api.anthropic.com/v1/messages/count_tokens")
        );
        assert_eq!(
            count_url("http://127.0.0.1:9/v1/messages?beta=true").as_deref(),
            Some("http://127.0.0.1:9/v1/messages/count_tokens?beta=true")
        );
        assert_eq!(count_url("http://h/v1/chat/completions"), None);
        let body = br#"{"model":"claude-x","max_tokens":9,"stream":false,"temperature":1,"messages":[],"system":"s","tools":[]}"#;
        let narrowed: Value = serde_json::from_slice(&count_body(body).unwrap()).unwrap();
        assert_eq!(
            narrowed,
            json!({"model": "claude-x", "messages": [], "system": "s", "tools": []})
        );
    }

    #[test]
    fn the_estimate_is_a_token_per_four_bytes_of_the_chat_prompt() {
        let request = json!({"model": "a/b", "messages": [{"role": "user", "content": "hello there"}]});
        let tokens = estimated(request.as_object().unwrap().clone()).unwrap();
        let prompt = r#"{"messages":[{"content":"hello there","role":"user"}],"tools":null}"#;
        assert_eq!(tokens, (prompt.len() as u64).div_ceil(4));
        let refused = json!({"model": "a/b", "messages": [{"role": "tool", "content": "x"}]});
        assert_eq!(estimated(refused.as_object().unwrap().clone()).unwrap_err().status, 400);
    }
}
