//! An actor as a chat model: `model: "actor/{namespace}/{deployment}"` (or
//! `actor/by-id/{id}`) on `/v1/chat/completions`. The messages become the
//! run's input (see [`input_from_messages`]), and the run's output comes back
//! as the assistant's message, whole or as chunks, with `provider: "actor"`
//! and the run's exact cost in `usage.cost`. The data plane owns the route;
//! [`ActorModels`] is the delegate it hands `actor/` models to.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tollgate_actors::ir::Ir;

use super::http::{api_error, finished_body};
use super::{Actors, Finished, Target, status_of};
use tollgate_gateway::ModelDelegate;
use tollgate_identity::auth::Caller;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// Hosted actors as chat models: the data plane's delegate for `actor/`.
pub struct ActorModels(pub Arc<Actors>);

impl ModelDelegate for ActorModels {
    fn prefix(&self) -> &'static str {
        "actor/"
    }

    fn serve(
        &self,
        caller: Caller,
        model: String,
        request: Value,
        request_id: RequestId,
    ) -> futures_util::future::BoxFuture<'static, Response> {
        let actors = self.0.clone();
        Box::pin(async move { complete(actors, caller, &model, request, request_id).await })
    }
}

pub async fn complete(
    actors: Arc<Actors>,
    caller: Caller,
    path: &str,
    request: Value,
    request_id: RequestId,
) -> Response {
    let target = match path.split_once('/') {
        Some(("by-id", id)) => match id.parse() {
            Ok(id) => Target::Id(id),
            Err(message) => {
                return ApiError::invalid_request(message)
                    .with_request_id(&request_id.0)
                    .into_response();
            }
        },
        Some((namespace, name)) if !name.contains('/') => Target::Deployment {
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        _ => {
            return ApiError::invalid_request(format!(
                "'actor/{path}' is not an actor model: use actor/<namespace>/<deployment> or actor/by-id/<id>"
            ))
            .into_response();
        }
    };
    let Some(messages) = request["messages"].as_array().filter(|m| !m.is_empty()) else {
        return ApiError::invalid_request("'messages' must be a non-empty array").into_response();
    };
    let resolved = match actors.resolve(&caller.0, &target).await {
        Ok(resolved) => resolved,
        Err(error) => return api_error(error).into_response(),
    };
    let input = input_from_messages(&resolved.1, messages);
    let stream = request["stream"].as_bool() == Some(true);
    let model = format!("actor/{path}");
    let finished = match actors.run(caller.0.clone(), &target, resolved, input, None, None).await {
        Ok(finished) => finished,
        Err(error) => return api_error(error).into_response(),
    };
    if let Err(error) = &finished.result {
        let status = StatusCode::from_u16(status_of(&error.code)).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
        return (status, axum::Json(finished_body(&finished))).into_response();
    }
    match stream {
        false => axum::Json(completion(&finished, &model)).into_response(),
        true => chunks(&finished, &model),
    }
}

/// The run's input from chat messages:
/// 1. the last user message's text, when it is a JSON object, is the input;
/// 2. else, when the actor's input schema has exactly one string property,
///    that property gets the last user message's text;
/// 3. else the input is `{"messages": [...]}` (the messages as sent).
pub fn input_from_messages(ir: &Ir, messages: &[Value]) -> Value {
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        })
        .unwrap_or_default();
    if let Ok(object @ Value::Object(_)) = serde_json::from_str::<Value>(&last_user) {
        return object;
    }
    let strings: Vec<&String> = ir.inputs["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .filter(|(_, schema)| schema["type"] == "string")
                .map(|(name, _)| name)
                .collect()
        })
        .unwrap_or_default();
    let property_count = ir.inputs["properties"].as_object().map_or(0, |p| p.len());
    if let [only] = strings.as_slice()
        && property_count == 1
    {
        return json!({ (*only).clone(): last_user });
    }
    json!({ "messages": messages })
}

fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn created() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn service(finished: &Finished) -> Value {
    json!({
        "request_id": finished.request_id,
        "run_id": finished.run_id,
        "actor_id": finished.actor_id,
        "provider": "actor",
        "cost_usd": finished.cost.usd_string(),
        "model_calls": finished.model_calls,
    })
}

fn usage(finished: &Finished) -> Value {
    let cost: Value = serde_json::from_str(&finished.cost.usd_decimal()).unwrap_or(json!(0));
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost": cost})
}

fn completion(finished: &Finished, model: &str) -> Value {
    let output = finished.result.as_ref().map(output_text).unwrap_or_default();
    json!({
        "id": format!("chatcmpl-{}", finished.run_id),
        "object": "chat.completion",
        "created": created(),
        "model": model,
        "provider": "actor",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": output}, "finish_reason": "stop"}],
        "usage": usage(finished),
        "service": service(finished),
    })
}

/// The run's output as a chat-completions stream: a role chunk, the content,
/// a finish chunk, then the usage and service, then `[DONE]`.
fn chunks(finished: &Finished, model: &str) -> Response {
    let id = format!("chatcmpl-{}", finished.run_id);
    let created = created();
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let output = finished.result.as_ref().map(output_text).unwrap_or_default();
    let mut tail = json!({
        "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
        "provider": "actor", "choices": [], "usage": usage(finished), "service": service(finished),
    });
    tail["choices"] = json!([]);
    let frames = vec![
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": output}), Value::Null),
        chunk(json!({}), json!("stop")),
        tail,
    ];
    let events = frames
        .into_iter()
        .map(|frame| Ok::<_, Infallible>(Event::default().data(frame.to_string())))
        .chain(std::iter::once(Ok(Event::default().data("[DONE]"))));
    Sse::new(futures_util::stream::iter(events)).into_response()
}
