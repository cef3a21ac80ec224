//! Each deployment is an A2A agent of its own:
//! - its Agent Card at `/v1/actors/{namespace}/{deployment}/.well-known/agent-card.json`;
//! - JSON-RPC at `/v1/actors/{namespace}/{deployment}/a2a`: `SendMessage`
//!   runs the actor and answers with the agent's message (the output as a
//!   text part, or a data part for structured output); `SendStreamingMessage`
//!   streams the run as a task: `working`, the output as artifact chunks as
//!   the model writes them, then `completed` (or `failed`).
//!
//! The message becomes the input as on the chat surface: a data part is the
//! input itself; text parts go through the same mapping as chat messages.
//! Runs keep no A2A task state: each message is a new run.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tollgate_actors::runtime::RunEvent;

use super::{Actors, Finished, Target};
use crate::auth::Caller;

pub fn routes() -> Router<crate::app::AppState> {
    Router::new()
        .route(
            "/v1/actors/{namespace}/{deployment}/.well-known/agent-card.json",
            get(card),
        )
        .route("/v1/actors/{namespace}/{deployment}/a2a", post(rpc))
}

fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    format!("http://{host}")
}

async fn card(
    State(actors): State<Arc<Actors>>,
    Path((namespace, deployment)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let found = actors.store.deployment(&namespace, &deployment).await.ok().flatten();
    let Some(found) = found else {
        return crate::error::ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "invalid_request_error",
            "not_found",
            format!("no deployment '{namespace}/{deployment}'"),
        )
        .into_response();
    };
    let Ok(id) = found.actor_id.parse() else {
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let description = match actors.ir(&id).await {
        Ok(ir) => ir.metadata.description.clone(),
        Err(_) => String::new(),
    };
    let url = format!("{}/v1/actors/{namespace}/{deployment}/a2a", base_url(&headers));
    axum::Json(json!({
        "name": format!("{namespace}/{deployment}"),
        "description": if description.is_empty() { format!("The hosted actor {namespace}/{deployment}.") } else { description.clone() },
        "version": found.actor_id,
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "provider": {"organization": "Tollgate", "url": "https://tollgate.dev"},
        "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": false},
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A Tollgate API key (tg_live_…); runs are billed to its workspace."}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": "run",
            "name": format!("Run {namespace}/{deployment}"),
            "description": if description.is_empty() { "Runs the actor on the message.".to_string() } else { description },
            "tags": ["actor"],
            "inputModes": ["text/plain", "application/json"],
            "outputModes": ["text/plain", "application/json"],
        }],
    }))
    .into_response()
}

fn rpc_error(id: &Value, code: i64, message: impl Into<String>, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message.into()});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// The run's input from an A2A message's parts.
fn input_of(ir: &tollgate_actors::ir::Ir, message: &Value) -> Result<Value, String> {
    let parts = message["parts"].as_array().ok_or("message.parts must be a list")?;
    if let Some(data) = parts.iter().find_map(|p| p.get("data").filter(|d| d.is_object())) {
        return Ok(crate::control::protojson::integral_numbers(data.clone()));
    }
    let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    if text.is_empty() {
        return Err("message.parts must hold a text part or a data part (an object)".into());
    }
    let messages = [json!({"role": "user", "content": text.join("\n")})];
    Ok(super::chat::input_from_messages(ir, &messages))
}

fn output_part(output: &Value) -> Value {
    match output {
        Value::String(text) => json!({"text": text}),
        Value::Object(_) => json!({"data": output}),
        other => json!({"text": other.to_string()}),
    }
}

fn run_metadata(finished: &Finished) -> Value {
    json!({
        "run_id": finished.run_id,
        "request_id": finished.request_id,
        "actor_id": finished.actor_id,
        "cost_usd": finished.cost.usd_string(),
    })
}

async fn rpc(
    State(actors): State<Arc<Actors>>,
    Path((namespace, deployment)): Path<(String, String)>,
    caller: Caller,
    body: Bytes,
) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return axum::Json(rpc_error(
            &Value::Null,
            -32700,
            "Parse error: the body is not JSON",
            None,
        ))
        .into_response();
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request["method"].as_str().unwrap_or_default();
    if request["jsonrpc"] != "2.0" || method.is_empty() {
        return axum::Json(rpc_error(
            &id,
            -32600,
            "Invalid Request: jsonrpc must be \"2.0\" with a method",
            None,
        ))
        .into_response();
    }
    let streaming = match method {
        "SendMessage" => false,
        "SendStreamingMessage" => true,
        "GetTask" | "CancelTask" | "SubscribeToTask" => {
            return axum::Json(rpc_error(
                &id,
                -32001,
                "Task not found: an actor's runs keep no task state; each message is a new run",
                None,
            ))
            .into_response();
        }
        other => {
            return axum::Json(rpc_error(&id, -32601, format!("Method not found: {other}"), None)).into_response();
        }
    };
    let message = &request["params"]["message"];
    if !message.is_object() {
        return axum::Json(rpc_error(&id, -32602, "Invalid params: message is required", None)).into_response();
    }
    let target = Target::Deployment {
        namespace,
        name: deployment,
    };
    let resolved = match actors.resolve(&caller.0, &target).await {
        Ok(resolved) => resolved,
        Err(error) => return axum::Json(rpc_error(&id, -32602, error.to_string(), None)).into_response(),
    };
    let input = match input_of(&resolved.1, message) {
        Ok(input) => input,
        Err(problem) => {
            return axum::Json(rpc_error(&id, -32602, format!("Invalid params: {problem}"), None)).into_response();
        }
    };
    let context_id = message["contextId"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map_or_else(|| new_id("ctx"), str::to_string);
    if streaming {
        return stream(actors, caller, target, resolved, input, id, context_id);
    }
    match actors.run(caller.0.clone(), &target, resolved, input, None, None).await {
        Ok(finished) => match &finished.result {
            Ok(output) => axum::Json(json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": {"message": {
                    "messageId": new_id("msg"),
                    "contextId": context_id,
                    "role": "ROLE_AGENT",
                    "parts": [output_part(output)],
                    "metadata": run_metadata(&finished),
                }},
            }))
            .into_response(),
            Err(error) => axum::Json(rpc_error(
                &id,
                -32603,
                error.message.clone(),
                Some(json!({"code": error.code, "run": run_metadata(&finished)})),
            ))
            .into_response(),
        },
        Err(error) => axum::Json(rpc_error(&id, -32603, error.to_string(), None)).into_response(),
    }
}

/// The run as an A2A task stream: the task (working), each text delta as an
/// artifact chunk, the final output as the last chunk, then the terminal status.
fn stream(
    actors: Arc<Actors>,
    caller: Caller,
    target: Target,
    resolved: (tollgate_actors::ActorId, Arc<tollgate_actors::ir::Ir>),
    input: Value,
    id: Value,
    context_id: String,
) -> Response {
    let task_id = new_id("task");
    let artifact_id = new_id("art");
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let (done, finished) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let _ = done.send(
            actors
                .run(caller.0.clone(), &target, resolved, input, None, Some(events))
                .await,
        );
    });
    let guard = super::http::AbortOnDrop(task.abort_handle());
    let frame = {
        let id = id.clone();
        move |result: Value| {
            Ok::<_, Infallible>(
                Event::default().data(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()),
            )
        }
    };
    let status = |state: &str| json!({"state": state, "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)});
    let opening =
        frame(json!({"task": {"id": task_id, "contextId": context_id, "status": status("TASK_STATE_WORKING")}}));
    let (ids, chunk_frame) = (
        (task_id.clone(), context_id.clone(), artifact_id.clone()),
        frame.clone(),
    );
    let progress = futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx)).filter_map(move |event| {
        let (task_id, context_id, artifact_id) = ids.clone();
        let frame = chunk_frame.clone();
        async move {
            let RunEvent::Delta { text, .. } = event else { return None };
            Some(frame(json!({"artifactUpdate": {
                "taskId": task_id, "contextId": context_id, "append": true, "lastChunk": false,
                "artifact": {"artifactId": format!("{artifact_id}-progress"), "name": "progress", "parts": [{"text": text}]},
            }})))
        }
    });
    let closing = futures_util::stream::once(async move {
        let _guard = guard;
        let mut frames = Vec::new();
        match finished.await {
            Ok(Ok(finished)) => match &finished.result {
                Ok(output) => {
                    frames.push(frame(json!({"artifactUpdate": {
                        "taskId": task_id, "contextId": context_id, "append": false, "lastChunk": true,
                        "artifact": {"artifactId": artifact_id, "name": "output", "parts": [output_part(output)],
                                     "metadata": run_metadata(&finished)},
                    }})));
                    frames.push(frame(json!({"statusUpdate": {
                        "taskId": task_id, "contextId": context_id, "status": status("TASK_STATE_COMPLETED"),
                        "metadata": run_metadata(&finished),
                    }})));
                }
                Err(error) => frames.push(frame(json!({"statusUpdate": {
                    "taskId": task_id, "contextId": context_id,
                    "status": {"state": "TASK_STATE_FAILED", "message": {
                        "messageId": new_id("msg"), "role": "ROLE_AGENT", "taskId": task_id, "contextId": context_id,
                        "parts": [{"text": error.message}],
                    }},
                    "metadata": run_metadata(&finished),
                }}))),
            },
            _ => frames.push(frame(json!({"statusUpdate": {
                "taskId": task_id, "contextId": context_id, "status": status("TASK_STATE_FAILED"),
            }}))),
        }
        futures_util::stream::iter(frames)
    })
    .flatten();
    Sse::new(
        futures_util::stream::once(async move { opening })
            .chain(progress)
            .chain(closing),
    )
    .into_response()
}
