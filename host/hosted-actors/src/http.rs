//! The HTTP surface of hosted actors:
//! - `POST /v1/actors/{namespace}/{deployment}` and `POST /v1/actors/by-id/{id}`:
//!   `{"input": {...}}` answers `{"output", "run_id", "actor_id", "service"}`;
//!   with `"stream": true` (or `Accept: text/event-stream`) typed SSE events;
//! - `POST /v1/chat/completions` with `model: "actor/{namespace}/{deployment}"`:
//!   the actor as a chat model (`chat`, a delegate of the data plane's route);
//! - `GET /v1/provenance/key`: the public key trails are signed with.
//!
//! A caller that goes away cancels the run: the JSON path runs inside the
//! request's future, and the SSE path's task is aborted when its stream drops.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRef, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tollgate_actors::runtime::{RunError, RunEvent};
use tollgate_core::money::Nanos;

use super::{ActorError, Actors, Finished, Target, status_of};
use tollgate_identity::auth::{AuthState, Caller};
use tollgate_web::error::ApiError;

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Actors>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    Router::new()
        .route("/v1/actors/by-id/{id}", post(invoke_by_id))
        .route("/v1/actors/{namespace}/{deployment}", post(invoke_deployment))
        .route("/v1/provenance/key", get(provenance_key))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InvokeBody {
    #[serde(default = "empty_object")]
    input: Value,
    #[serde(default)]
    stream: bool,
    /// The caller's own cap on the run's cost, in USD (a decimal string).
    #[serde(default)]
    max_cost_usd: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

async fn provenance_key(State(actors): State<Arc<Actors>>) -> Response {
    axum::Json(json!({
        "algorithm": "ed25519",
        "encoding": "base64url",
        "public_key": actors.public_key(),
        "signs": "the RFC 8785 canonical JSON of each run's trail (runs.get → trail, signature)",
    }))
    .into_response()
}

async fn invoke_deployment(
    State(actors): State<Arc<Actors>>,
    Path((namespace, deployment)): Path<(String, String)>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let target = Target::Deployment {
        namespace,
        name: deployment,
    };
    invoke(actors, target, caller, headers, body).await
}

async fn invoke_by_id(
    State(actors): State<Arc<Actors>>,
    Path(id): Path<String>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match id.parse() {
        Ok(id) => invoke(actors, Target::Id(id), caller, headers, body).await,
        Err(message) => ApiError::invalid_request(message).into_response(),
    }
}

async fn invoke(
    actors: Arc<Actors>,
    target: Target,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let prepared = async {
        let body = body.map_err(|e| ApiError::invalid_request(format!("Could not read the request body: {e}")))?;
        let request: InvokeBody = serde_json::from_slice(&body).map_err(|e| {
            ApiError::invalid_request(format!(
                "The body must be {{\"input\": {{...}}, \"stream\": false, \"max_cost_usd\": \"…\"}}: {e}"
            ))
        })?;
        if !request.input.is_object() {
            return Err(ApiError::invalid_request("'input' must be a JSON object"));
        }
        let max_cost = request
            .max_cost_usd
            .as_deref()
            .map(Nanos::from_usd)
            .transpose()
            .map_err(|e| ApiError::invalid_request(format!("max_cost_usd: {e}")))?;
        let resolved = actors.resolve(&caller.0, &target).await.map_err(api_error)?;
        let accepts_sse = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        Ok((request, max_cost, resolved, accepts_sse))
    }
    .await;
    let (request, max_cost, resolved, accepts_sse) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => return error.into_response(),
    };
    if request.stream || accepts_sse {
        return stream_run(actors, target, caller, resolved, request.input, max_cost);
    }
    match actors
        .run(caller.0.clone(), &target, resolved, request.input, max_cost, None)
        .await
    {
        Ok(finished) => finished_response(&finished),
        Err(error) => api_error(error).into_response(),
    }
}

/// The body every surface answers a run with (also the SSE `result` event).
pub fn finished_body(finished: &Finished) -> Value {
    let service = json!({
        "request_id": finished.request_id,
        "cost_usd": finished.cost.usd_string(),
        "model_calls": finished.model_calls,
    });
    match &finished.result {
        Ok(output) => json!({
            "output": output,
            "run_id": finished.run_id,
            "actor_id": finished.actor_id,
            "service": service,
        }),
        Err(error) => json!({
            "error": error_object(error),
            "run_id": finished.run_id,
            "actor_id": finished.actor_id,
            "service": service,
        }),
    }
}

fn error_object(error: &RunError) -> Value {
    json!({
        "message": error.message,
        "type": "actor_error",
        "code": error.code,
        "param": null,
        "step": error.step,
    })
}

fn finished_response(finished: &Finished) -> Response {
    let status = match &finished.result {
        Ok(_) => StatusCode::OK,
        Err(error) => StatusCode::from_u16(status_of(&error.code)).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY),
    };
    let mut response = (status, axum::Json(finished_body(finished))).into_response();
    if let Ok(value) = finished.request_id.parse() {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// Aborts the run's task when the response stream is dropped (the caller
/// went away).
pub struct AbortOnDrop(pub tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn stream_run(
    actors: Arc<Actors>,
    target: Target,
    caller: Caller,
    resolved: (tollgate_actors::ActorId, Arc<tollgate_actors::ir::Ir>),
    input: Value,
    max_cost: Option<Nanos>,
) -> Response {
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let (done, finished) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let result = actors
            .run(caller.0.clone(), &target, resolved, input, max_cost, Some(events))
            .await;
        let _ = done.send(result);
    });
    let guard = AbortOnDrop(task.abort_handle());
    let progress = futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx)).map(|event| {
        let name = match &event {
            RunEvent::StepStarted { .. } => "step.started",
            RunEvent::StepFinished { .. } => "step.finished",
            RunEvent::Delta { .. } => "delta",
            RunEvent::ToolCall { .. } => "tool.call",
            RunEvent::ToolResult { .. } => "tool.result",
        };
        let data = serde_json::to_string(&event).unwrap_or_default();
        Ok::<_, Infallible>(Event::default().event(name).data(data))
    });
    let last = futures_util::stream::once(async move {
        let _guard = guard;
        let event = match finished.await {
            Ok(Ok(finished)) => {
                let name = if finished.result.is_ok() { "result" } else { "error" };
                Event::default().event(name).data(finished_body(&finished).to_string())
            }
            Ok(Err(error)) => {
                let error = api_error(error);
                Event::default()
                    .event("error")
                    .data(json!({"error": error.error_object()}).to_string())
            }
            Err(_) => Event::default()
                .event("error")
                .data(json!({"error": {"message": "the run was cancelled", "type": "actor_error", "code": "cancelled", "param": null}}).to_string()),
        };
        Ok::<_, Infallible>(event)
    });
    let done = futures_util::stream::once(async { Ok(Event::default().data("[DONE]")) });
    Sse::new(progress.chain(last).chain(done)).into_response()
}

pub fn api_error(error: ActorError) -> ApiError {
    match error {
        ActorError::NotFound(message) => {
            ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", message)
        }
        ActorError::Invalid(message) => ApiError::invalid_request(message),
        ActorError::Forbidden(message) => {
            ApiError::new(StatusCode::FORBIDDEN, "permission_error", "forbidden", message)
        }
        ActorError::PlanLimit(message) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "billing_error",
            "plan_limit_reached",
            message,
        ),
        ActorError::Busy(message) => ApiError::key_rate_limited(message, super::compiles::RETRY_AFTER_SECS),
        ActorError::Internal(error) => {
            tracing::error!(error = %tollgate_core::error_text::error_chain(error.as_ref()), "actor request failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                "internal_error",
                "The gateway failed to run the actor.",
            )
        }
    }
}
