//! Each hosted actor deployment is an A2A agent of its own, over the actors'
//! API (`tollgate_hosted_actors`), with the control plane's errors, version header and
//! `Origin` rule:
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
use axum::extract::{FromRef, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tollgate_actors::runtime::RunEvent;

use super::ControlPlane;
use super::error::{OPERATION_FAILED, OpError, RpcError, TOLLGATE_DOMAIN};
use tollgate_hosted_actors::{Actors, Finished, Target};
use tollgate_identity::auth::{AuthState, Caller};
use tollgate_web::error::ApiError;

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Actors>: FromRef<S>,
    Arc<ControlPlane>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    Router::new()
        .route(
            "/v1/actors/{namespace}/{deployment}/.well-known/agent-card.json",
            get(card),
        )
        // Clients that treat the card's interface URL as a base URL (the A2A
        // TCK among them) post to `…/a2a/`: the same endpoint.
        .route("/v1/actors/{namespace}/{deployment}/a2a", post(rpc))
        .route("/v1/actors/{namespace}/{deployment}/a2a/", post(rpc))
}

async fn card(
    State(actors): State<Arc<Actors>>,
    State(control): State<Arc<ControlPlane>>,
    Path((namespace, deployment)): Path<(String, String)>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
) -> Response {
    let found = actors.store().deployment(&namespace, &deployment).await.ok().flatten();
    // A private actor's deployment shows its card only to a caller with a key.
    if let (Some(found), Err(refused)) = (&found, &caller)
        && !actors.is_public(&found.actor_id).await
    {
        return refused.clone().into_response();
    }
    let Some(found) = found else {
        return tollgate_web::error::ApiError::new(
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
    // `public_url` when configured; the Host header only without it (docs/configuration.md).
    let url = format!(
        "{}/v1/actors/{namespace}/{deployment}/a2a",
        control.public_url(Some(&headers))
    );
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

/// A JSON-RPC error answer whose `data` carries the `google.rpc.ErrorInfo`
/// A2A 1.0 asks for (§9.5): the same errors the control plane answers.
fn rpc_error(id: &Value, error: &RpcError) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})).into_response()
}

/// A refused caller (no key, a bad key, a viewer, over its rate) as a
/// JSON-RPC error with the HTTP status and headers the data plane would send
/// (`WWW-Authenticate` on 401, `Retry-After` on 429).
fn refusal(error: ApiError) -> Response {
    let reason = match error.status {
        StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
        StatusCode::FORBIDDEN => "PERMISSION_DENIED",
        StatusCode::TOO_MANY_REQUESTS => "RESOURCE_EXHAUSTED",
        _ => "INTERNAL",
    };
    let rpc = RpcError::new(OPERATION_FAILED, error.message.clone(), reason, TOLLGATE_DOMAIN);
    let mut response = error.clone().into_response();
    let body = json!({"jsonrpc": "2.0", "id": Value::Null, "error": rpc.to_json()});
    *response.body_mut() = axum::body::Body::from(body.to_string());
    response
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// The run's input from an A2A message's parts.
fn input_of(ir: &tollgate_actors::ir::Ir, message: &Value) -> Result<Value, String> {
    let parts = message["parts"].as_array().ok_or("message.parts must be a list")?;
    if let Some(data) = parts.iter().find_map(|p| p.get("data").filter(|d| d.is_object())) {
        return Ok(super::protojson::integral_numbers(data.clone()));
    }
    let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    if text.is_empty() {
        return Err("message.parts must hold a text part or a data part (an object)".into());
    }
    let messages = [json!({"role": "user", "content": text.join("\n")})];
    Ok(tollgate_hosted_actors::input_from_messages(ir, &messages))
}

fn output_part(output: &Value) -> Value {
    match output {
        Value::String(text) => json!({"text": text}),
        Value::Object(_) => json!({"data": output}),
        other => json!({"text": other.to_string()}),
    }
}

/// The run, in A2A's camelCase like every other field of the protocol (§5.5).
fn run_metadata(finished: &Finished) -> Value {
    json!({
        "runId": finished.run_id,
        "requestId": finished.request_id,
        "actorId": finished.actor_id,
        "costUsd": finished.cost.usd_string(),
    })
}

/// The media types a deployment takes (its card's `defaultInputModes`).
const INPUT_MODES: [&str; 2] = ["text/plain", "application/json"];

/// A part the actor cannot take: a file (`raw` or `url`), or any part whose
/// `mediaType` is not one of [`INPUT_MODES`]. Answered as
/// ContentTypeNotSupported (A2A §3.1.1), naming the type.
fn unsupported_part(message: &Value) -> Option<String> {
    let parts = message["parts"].as_array()?;
    parts.iter().find_map(|part| {
        let media_type = part["mediaType"].as_str();
        let file = part.get("raw").is_some() || part.get("url").is_some();
        match media_type {
            Some(media_type) if !INPUT_MODES.contains(&media_type) => Some(media_type.to_string()),
            _ if file => Some(media_type.unwrap_or("application/octet-stream").to_string()),
            _ => None,
        }
    })
}

async fn rpc(
    State(actors): State<Arc<Actors>>,
    State(control): State<Arc<ControlPlane>>,
    Path((namespace, deployment)): Path<(String, String)>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(origin) = control.foreign_origin(&headers) {
        let mut response = rpc_error(&Value::Null, &super::rpc::foreign_origin(&origin));
        *response.status_mut() = StatusCode::FORBIDDEN;
        return response;
    }
    let caller = match caller {
        Ok(caller) => caller,
        Err(error) => return refusal(error),
    };
    if let Some(content_type) = super::rpc::unsupported_content_type(&headers) {
        let mut response = rpc_error(&Value::Null, &RpcError::content_type_not_supported(&content_type));
        *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        return response;
    }
    let request = match parse_request(&headers, &body) {
        Ok(request) => request,
        Err((id, error)) => return rpc_error(&id, &error),
    };
    let (id, params) = (&request.id, &request.params);
    let streaming = match method_kind(&request.method, params) {
        Ok(streaming) => streaming,
        Err(Answered::Error(error)) => return rpc_error(id, &error),
        Err(Answered::Result(result)) => {
            return axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response();
        }
    };
    let message = &params["message"];
    if !message.is_object() {
        return rpc_error(id, &RpcError::invalid_params("message is required"));
    }
    // Runs keep no task state, so no task can be continued.
    if let Some(task) = message["taskId"].as_str().filter(|t| !t.is_empty()) {
        return rpc_error(id, &RpcError::task_not_found(task));
    }
    if let Some(media_type) = unsupported_part(message) {
        return rpc_error(id, &RpcError::content_type_not_supported(&media_type));
    }
    let target = Target::Deployment {
        namespace,
        name: deployment,
    };
    let resolved = match actors.resolve(&caller.0, &target).await {
        Ok(resolved) => resolved,
        Err(error) => return rpc_error(id, &OpError::from(error).into_rpc()),
    };
    // Checked here, before a run starts, so both paths answer bad input the
    // same way: invalid params, not a failed task on one and an internal
    // error on the other.
    let input = match input_of(&resolved.1, message)
        .and_then(|input| tollgate_actors::runtime::check_input(&resolved.1, &input).map(|()| input))
    {
        Ok(input) => input,
        Err(problem) => return rpc_error(id, &RpcError::invalid_params(format!("Invalid params: {problem}"))),
    };
    let context_id = message["contextId"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map_or_else(|| new_id("ctx"), str::to_string);
    if streaming {
        return stream(actors, caller, target, resolved, input, id.clone(), context_id);
    }
    match actors.run(caller.0.clone(), &target, resolved, input, None, None).await {
        Ok(finished) => finished_answer(id, &context_id, &finished),
        Err(error) => rpc_error(id, &OpError::from(error).into_rpc()),
    }
}

/// A JSON-RPC request to a deployment's agent, its envelope checked.
struct AgentRequest {
    id: Value,
    method: String,
    params: Value,
}

/// The body as one JSON-RPC 2.0 request of a supported protocol version;
/// else the error to answer, with the request's id when it has one.
fn parse_request(headers: &HeaderMap, body: &[u8]) -> Result<AgentRequest, (Value, RpcError)> {
    let mut request = match serde_json::from_slice::<Value>(body) {
        Ok(request @ Value::Object(_)) => request,
        Ok(_) => {
            return Err((
                Value::Null,
                RpcError::invalid_request("A request is one JSON-RPC object"),
            ));
        }
        Err(e) => return Err((Value::Null, RpcError::parse_error(e))),
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request["method"].as_str().unwrap_or_default().to_string();
    if request["jsonrpc"] != "2.0" || method.is_empty() {
        return Err((id, RpcError::invalid_request("jsonrpc must be \"2.0\" with a method")));
    }
    if let Err(error) = super::rpc::version(headers) {
        return Err((id, error));
    }
    let params = request.get_mut("params").map(Value::take).unwrap_or(Value::Null);
    Ok(AgentRequest { id, method, params })
}

/// A method answered without a run.
enum Answered {
    Error(RpcError),
    Result(Value),
}

/// Whether `method` runs the actor streamed (`SendStreamingMessage`) or not
/// (`SendMessage`); every other method is answered without a run: runs
/// keep no task state, so every task id is unknown here.
fn method_kind(method: &str, params: &Value) -> Result<bool, Answered> {
    match method {
        "SendMessage" => Ok(false),
        "SendStreamingMessage" => Ok(true),
        "GetTask" | "CancelTask" | "SubscribeToTask" => {
            let task = params["id"].as_str().unwrap_or_default();
            Err(Answered::Error(RpcError::task_not_found(task)))
        }
        "ListTasks" => Err(Answered::Result(json!({
            "tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0,
        }))),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(Answered::Error(RpcError::push_not_supported())),
        "GetExtendedAgentCard" => Err(Answered::Error(RpcError::unsupported(
            "This agent has no extended card (capabilities.extendedAgentCard is false)",
        ))),
        other => Err(Answered::Error(RpcError::method_not_found(other))),
    }
}

/// A finished run's answer: the agent's message, or a FAILED task for a
/// run that started and failed (as on the streaming path).
fn finished_answer(id: &Value, context_id: &str, finished: &Finished) -> Response {
    match &finished.result {
        Ok(output) => axum::Json(json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {"message": {
                "messageId": new_id("msg"),
                "contextId": context_id,
                "role": "ROLE_AGENT",
                "parts": [output_part(output)],
                "metadata": run_metadata(finished),
            }},
        }))
        .into_response(),
        Err(error) => {
            let task_id = new_id("task");
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {"task": {
                "id": task_id,
                "contextId": context_id,
                "status": {"state": "TASK_STATE_FAILED", "timestamp": now_rfc3339(), "message": {
                    "messageId": new_id("msg"), "role": "ROLE_AGENT", "taskId": task_id, "contextId": context_id,
                    "parts": [{"data": {"error": {"code": error.code, "message": error.message}}}, {"text": error.message}],
                }},
                "metadata": run_metadata(finished),
            }}}))
            .into_response()
        }
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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
    let guard = tollgate_hosted_actors::http::AbortOnDrop(task.abort_handle());
    let frame = {
        let id = id.clone();
        move |result: Value| {
            Ok::<_, Infallible>(
                Event::default().data(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()),
            )
        }
    };
    let status = |state: &str| json!({"state": state, "timestamp": now_rfc3339()});
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
