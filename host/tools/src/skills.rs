//! `POST /v1/skills/{install}`: runs a skill over plain HTTP.
//!
//! The body is `{"input": {...}, "stream": false}`. The answer is
//! `{"output": …, "service": {"request_id", "cost_usd", "model_calls"}}`,
//! where `cost_usd` is the exact sum of the skill's model calls, each billed
//! to the caller through the data plane. With `"stream": true` the answer is
//! SSE: a `progress` event per model call as it completes, then one `result`
//! (or `error`) event carrying the same object, then `[DONE]`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::time::Instant;

use tollgate_components::{CallError, Invocation, SkillError};
use tollgate_core::db::now_ms;
use tollgate_core::money::Nanos;
use tollgate_ledger::RequestKind;

use super::Components;
use super::calls::{CallSite, Logged, SEPARATOR, SKILL_TOOL};
use super::capabilities;
use super::installs::{Active, Loaded};
use tollgate_identity::auth::Principal;
use tollgate_web::error::ApiError;

/// What one model call inside a skill run cost, as the data plane billed it.
#[derive(Clone, Debug)]
pub struct ModelCall {
    pub request_id: String,
    pub provider: String,
    pub model: String,
    pub cost: Nanos,
}

/// The model calls of one run, recorded by the run's `ModelAccess` as they
/// complete, and announced to a streaming caller.
#[derive(Clone, Default)]
pub struct RunLedger {
    calls: Arc<Mutex<Vec<ModelCall>>>,
    progress: Option<tokio::sync::mpsc::UnboundedSender<Event>>,
}

impl RunLedger {
    pub fn record(&self, call: ModelCall) {
        if let Some(progress) = &self.progress {
            let data = json!({"model_call": model_call_json(&call)}).to_string();
            let _ = progress.send(Event::default().event("progress").data(data));
        }
        self.calls.lock().expect("run ledger lock").push(call);
    }

    /// Whether no model call was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.calls.lock().expect("run ledger lock").is_empty()
    }

    pub(crate) fn service(&self, request_id: &str) -> Value {
        let calls = self.calls.lock().expect("run ledger lock").clone();
        let total = calls.iter().fold(Nanos::ZERO, |sum, call| Nanos(sum.0 + call.cost.0));
        json!({
            "request_id": request_id,
            "cost_usd": total.usd_string(),
            "model_calls": calls.iter().map(model_call_json).collect::<Vec<_>>(),
        })
    }
}

fn model_call_json(call: &ModelCall) -> Value {
    json!({
        "request_id": call.request_id,
        "provider": call.provider,
        "model": call.model,
        "cost_usd": call.cost.usd_string(),
    })
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub input: Value,
    #[serde(default)]
    pub stream: bool,
}

/// Runs `install` (which must be a skill) as request `request_id` of
/// `caller`, and logs it (kind `skill_run`); its model and tool calls are
/// logged as running inside it.
pub async fn run(
    components: Arc<Components>,
    install: Arc<Active>,
    request: RunRequest,
    caller: Arc<Principal>,
    request_id: String,
) -> Result<Response, ApiError> {
    let Loaded::Skill(skill) = &install.component else {
        return Err(ApiError::invalid_request(format!(
            "'{}' is a {}, not a skill; use it through /v1/mcp",
            install.record.name, install.record.kind
        )));
    };
    if !request.input.is_object() {
        return Err(ApiError::invalid_request("'input' must be a JSON object"));
    }
    let invocation = Invocation {
        request_id: request_id.clone(),
        workspace: caller.workspace_id.clone(),
        install: install.record.name.clone(),
        depth: 0,
        logs: None,
        progress: None,
        elicit: None,
    };
    let site = CallSite {
        caller,
        parent_request_id: None,
        depth: 0,
        ceiling: None,
    };
    let input = request.input.to_string();
    let started = (now_ms(), Instant::now());
    let (sender, receiver) = match request.stream {
        // One channel carries the progress events and then the result; it
        // closes when the run's task (and with it every sender) is done.
        true => {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            (Some(sender), Some(receiver))
        }
        false => (None, None),
    };
    let ledger = RunLedger {
        calls: Arc::default(),
        progress: sender.clone(),
    };
    let capabilities = capabilities::for_caller(&components, &site.caller, &request_id, 0, ledger.clone(), None);
    let skill = skill.clone();
    let run = async move {
        let outcome = skill.run(invocation, install.grants.clone(), capabilities, input).await;
        let logged = Logged {
            kind: RequestKind::SkillRun,
            request_id: &request_id,
            site: &site,
            name: format!("{}{SEPARATOR}{SKILL_TOOL}", install.record.name),
            provider: &install.record.package,
            version: &install.record.version,
            streamed: request.stream,
        };
        logged.record(&components, outcome.as_ref().err(), started).await;
        match outcome {
            Ok(output) => Ok(json!({"output": output, "service": ledger.service(&request_id)})),
            Err(failure) => Err((run_error(failure), ledger, request_id)),
        }
    };
    let (Some(sender), Some(receiver)) = (sender, receiver) else {
        return match run.await {
            Ok(body) => Ok(axum::Json(body).into_response()),
            Err((error, _, _)) => Err(error),
        };
    };
    tokio::spawn(async move {
        let event = match run.await {
            Ok(body) => Event::default().event("result").data(body.to_string()),
            Err((error, ledger, request_id)) => error_event(error, &ledger, &request_id),
        };
        let _ = sender.send(event);
    });
    let events = tokio_stream_from(receiver).map(Ok::<_, Infallible>);
    let done = futures_util::stream::once(async { Ok(Event::default().data("[DONE]")) });
    Ok(Sse::new(events.chain(done)).into_response())
}

/// The documented error body, with the run's service block, as an SSE event.
fn error_event(error: ApiError, ledger: &RunLedger, request_id: &str) -> Event {
    let body = json!({"error": error.error_object(), "service": ledger.service(request_id)});
    Event::default().event("error").data(body.to_string())
}

/// Turns an unbounded receiver into a stream that ends when every sender is gone.
fn tokio_stream_from<T: Send + 'static>(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |context| receiver.poll_recv(context))
}

/// A failed run as the documented error: the skill's own failure is 422, a
/// model error keeps the model call's status (402 `budget_exceeded` for a
/// budget, `insufficient_balance` for an empty wallet), and
/// a sandbox fault is 502.
pub fn run_error(failure: CallError) -> ApiError {
    match failure {
        CallError::Skill(SkillError::InvalidInput(message)) => ApiError::invalid_request(message),
        CallError::Skill(SkillError::Model(error)) => {
            // The data plane's codes, kept where the caller acts on them.
            let (kind, code) = match error.status {
                // A budget (the run's, or a spend control) refused, not the wallet.
                402 if error.code == "budget_exceeded" => ("billing_error", "budget_exceeded"),
                402 => ("billing_error", "insufficient_balance"),
                // The sandbox's cap on model calls per run, not the key's rate.
                429 if error.code == "model_call_limit" => ("skill_error", "model_call_limit"),
                429 => ("rate_limit_error", "rate_limit_exceeded"),
                _ => ("skill_error", "model_call_failed"),
            };
            ApiError::new(
                StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_GATEWAY),
                kind,
                code,
                format!("a model call of the skill failed ({}): {}", error.code, error.message),
            )
        }
        CallError::Skill(SkillError::Failed(message)) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "skill_error", "skill_failed", message)
        }
        CallError::Tool(error) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "skill_error",
            "skill_failed",
            error.message,
        ),
        CallError::Fault(fault) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "skill_error",
            "component_failed",
            fault.to_string(),
        ),
    }
}
