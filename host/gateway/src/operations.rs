//! The model operations besides chat (embeddings, moderations, and the
//! rest of WIT 0.3.0's `operation`), in the same stages as chat: read what
//! the gateway needs of the request (the model and its fallbacks), resolve
//! the candidates that serve the operation, admit (the plan, budgets and
//! the wallet hold of the worst case), try the candidates in order through
//! the one attempt loop, settle what the answer reports, and answer with the
//! provider, the exact cost and the request id.
//!
//! The worst case is the operation's own unit at its price. For the
//! token-priced operations (embeddings, moderations) it is every byte of the
//! request counted as an input token, as for chat, with no output.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::DataPlane;
use super::attempts::{Answered, Call, exchange_error, final_error, first_answer};
use super::billing::{Bill, Demand};
use super::envelope::{ChatEnvelope, MAX_CANDIDATES};
use super::pipeline::{Answer, CallSite, Completion};
use super::provenance::{Attempt, Metered, Service, Trail};
use super::upstream::response_head;
use tollgate_identity::auth::Caller;
use tollgate_ledger::RequestKind;
use tollgate_plugin_host::{Measured, Operation, OperationBody, Usage};
use tollgate_routing::catalog::ModelRoute;
use tollgate_web::error::ApiError;

/// An operation besides chat, with the caller's request for it.
pub struct OperationCall {
    pub operation: Operation,
    pub body: OperationBody,
}

impl OperationCall {
    /// A JSON request for `operation`.
    pub fn json(operation: Operation, body: Bytes) -> Self {
        OperationCall {
            operation,
            body: OperationBody::Json(body.to_vec()),
        }
    }
}

/// The operation's name in the catalog (`ModelRoute::operations`) and the
/// request log.
pub fn name(operation: Operation) -> &'static str {
    kind(operation).as_str()
}

fn kind(operation: Operation) -> RequestKind {
    match operation {
        Operation::Embeddings => RequestKind::Embeddings,
        Operation::ImageGeneration => RequestKind::ImageGeneration,
        Operation::ImageEdit => RequestKind::ImageEdit,
        Operation::Speech => RequestKind::Speech,
        Operation::Transcription => RequestKind::Transcription,
        Operation::Translation => RequestKind::Translation,
        Operation::Moderation => RequestKind::Moderation,
        Operation::Rerank => RequestKind::Rerank,
    }
}

/// What the gateway reads of an operation's JSON request: the candidates
/// and the routing preferences. Everything else reaches the adapter as sent.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    models: Option<Vec<String>>,
    #[serde(default)]
    fallbacks: Option<Vec<String>>,
    #[serde(borrow, default)]
    provider: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

/// The request, as far as the gateway reads it.
struct Request<'a> {
    model: String,
    fallbacks: Vec<String>,
    provider: Option<&'a RawValue>,
    /// The bytes the worst case counts as input tokens.
    input_bytes: usize,
}

impl<'a> Request<'a> {
    fn read(operation: Operation, body: &'a OperationBody) -> Result<Self, ApiError> {
        let OperationBody::Json(json) = body else {
            return Err(ApiError::internal("a form operation reached the JSON reader"));
        };
        if json.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::invalid_request("The request body must be a JSON object."));
        }
        let envelope: Envelope<'a> = serde_json::from_slice(json).map_err(|e| {
            ApiError::invalid_request(format!(
                "The request body is not valid JSON for {}: {e}",
                name(operation)
            ))
        })?;
        let model = envelope
            .model
            .filter(|m| !m.is_empty())
            .ok_or_else(|| ApiError::invalid_request("'model' is required.").with_param("model"))?;
        if matches!(operation, Operation::Embeddings | Operation::Moderation)
            && envelope.input.is_none_or(|input| input.get() == "null")
        {
            return Err(ApiError::invalid_request("'input' is required.").with_param("input"));
        }
        if envelope.models.is_some() && envelope.fallbacks.is_some() {
            return Err(
                ApiError::invalid_request("Send either 'models' or 'fallbacks', not both.").with_param("models"),
            );
        }
        let fallbacks = envelope.models.or(envelope.fallbacks).unwrap_or_default();
        if fallbacks.len() + 1 > MAX_CANDIDATES {
            let message = format!("At most {} fallback models may follow 'model'.", MAX_CANDIDATES - 1);
            return Err(ApiError::invalid_request(message).with_param("models"));
        }
        Ok(Request {
            model,
            fallbacks,
            provider: envelope.provider,
            input_bytes: json.len(),
        })
    }
}

/// The operation, start to end.
pub async fn run(
    data: &Arc<DataPlane>,
    call: OperationCall,
    caller: &Caller,
    site: &CallSite<'_>,
) -> Result<Answer, ApiError> {
    let operation = call.operation;
    let request = match Request::read(operation, &call.body) {
        Ok(request) => request,
        Err(error) => return Err(refused(data, site, caller, operation, None, error).await),
    };
    let candidates = match candidates(data, caller, operation, &request) {
        Ok(candidates) => candidates,
        Err(error) => return Err(refused(data, site, caller, operation, Some(&request.model), error).await),
    };
    let admitted = match data.admit(&caller.0).await {
        Ok(admitted) => admitted,
        Err(error) => {
            let error = super::chat::plan_error(error);
            return Err(refused(data, site, caller, operation, Some(&request.model), error).await);
        }
    };
    let demand = Demand {
        request_id: &site.request_id.0,
        parent_request_id: site.parent,
        requested_model: &request.model,
        kind: kind(operation),
        streamed: false,
        body_bytes: request.input_bytes,
        messages: 0,
        max_output_tokens: 0,
        may_continue: false,
        ceiling: site.ceiling,
        admitted,
    };
    let routes = data.routes();
    let bill = Bill::open(
        data.ledger.as_ref(),
        &data.request_log,
        &caller.0,
        &candidates,
        routes.snapshot_id,
        demand,
    )
    .await?;
    attempts(data, site, &call, candidates, bill).await
}

/// The candidates in order: `model`, then `models`/`fallbacks`, as routing
/// orders them (groups and `provider` preferences included); every one must
/// serve the operation through an adapter that serves it.
fn candidates(
    data: &DataPlane,
    caller: &Caller,
    operation: Operation,
    request: &Request<'_>,
) -> Result<Vec<Arc<ModelRoute>>, ApiError> {
    let envelope = ChatEnvelope {
        model: request.model.as_str().into(),
        stream: false,
        messages: 0,
        max_output_tokens: None,
        fallbacks: request.fallbacks.iter().map(|m| m.as_str().into()).collect(),
        continuation: false,
        provider: request.provider,
        session: None,
    };
    let routes = data.routes();
    let (candidates, _decision) = crate::routing::select(data, &routes, &envelope, b"{}", &caller.0.workspace_id)?;
    let operation_name = name(operation);
    for route in &candidates {
        if !route.serves(operation_name) {
            let param = if route.id == request.model { "model" } else { "models" };
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "operation_not_supported",
                format!("{}.", route.not_serving(operation_name)),
            )
            .with_param(param));
        }
        let adapter_serves = data
            .adapters
            .get(&route.provider.adapter)
            .is_none_or(|adapter| adapter.serves(operation));
        if !adapter_serves {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "operation_not_supported",
                format!(
                    "model '{}' is served by adapter '{}', which does not serve {operation_name}.",
                    route.id, route.provider.adapter
                ),
            ));
        }
    }
    Ok(candidates)
}

/// Tries the candidates until one answers, reads the whole answer, settles
/// and answers.
async fn attempts(
    data: &Arc<DataPlane>,
    site: &CallSite<'_>,
    call: &OperationCall,
    candidates: Vec<Arc<ModelRoute>>,
    mut bill: Bill,
) -> Result<Answer, ApiError> {
    let request_id = &site.request_id.0;
    let mut trail = Trail::routed(None);
    let mut remaining: VecDeque<Arc<ModelRoute>> = candidates.into();
    let attempt_call = Call {
        request_id,
        body: &[],
        native: None,
        stream: false,
        injected_cap: None,
        continuation: None,
        operation: Some((call.operation, &call.body)),
    };
    let mut attempt = 0;
    match first_answer(data, &mut remaining, &attempt_call, &mut attempt, &mut bill, &mut trail).await {
        Ok(answered) => whole(data, request_id, answered, bill, trail).await.map(Answer::Whole),
        Err(error) => {
            let status = trail.0.last().and_then(|a| a.status);
            let error = final_error(error, &trail);
            bill.close(None, &trail, error.code, status).await;
            Err(error.with_attempts(trail.to_json()))
        }
    }
}

/// Reads and translates the whole answer, settles, and answers.
async fn whole(
    data: &DataPlane,
    request_id: &str,
    answered: Answered,
    mut bill: Bill,
    mut trail: Trail,
) -> Result<Completion, ApiError> {
    let Answered {
        route,
        mut session,
        response,
        started,
        flight,
    } = answered;
    let status = Some(response.status().as_u16());
    let attempt = |outcome: &str, metered: Metered| Attempt {
        route: route.clone(),
        outcome: outcome.to_string(),
        status,
        latency: started.elapsed(),
        metered,
    };
    let head = response_head(&response);
    let translated = match data
        .upstream
        .read_body(&route.provider, response, data.limits.max_upstream_body_bytes)
        .await
    {
        Ok(body) => {
            let _span = tollgate_telemetry::adapter_span(&route.provider.adapter, "operation-response").entered();
            session
                .operation_response(&head, &body)
                .map_err(|e| exchange_error(&route, e))
        }
        Err(error) => Err(error),
    };
    let object = translated.and_then(|answer| {
        serde_json::from_slice::<Map<String, Value>>(&answer.body).map_err(|e| {
            ApiError::adapter_refused(&route.provider.adapter, format!("output is not a JSON object: {e}"))
        })
    });
    let mut object = match object {
        Ok(object) => object,
        Err(error) => {
            if error.is_health_failure() {
                data.health.failed_after_answer(&route.id);
                flight.failed();
            }
            // The upstream answered, so it may have charged us: bill a local estimate.
            let metered = bill.meter(&route, None, 0);
            trail.push(attempt(error.code, metered));
            bill.close(Some(&route), &trail, error.code, status).await;
            return Err(error.with_attempts(trail.to_json()));
        }
    };
    let measured = session
        .measured()
        .map_err(|fault| crate::adapter_errors::fault(&fault))?;
    let metered = bill.meter(&route, measured.as_ref().and_then(token_usage), 0);
    if let Some(usage) = metered.usage {
        flight.finished(usage.input + usage.output, usage.output);
    }
    trail.push(attempt("success", metered));
    let billed = bill.close(Some(&route), &trail, "success", status).await;
    let service = Service {
        route: route.clone(),
        request_id: request_id.to_string(),
        billed,
        trail,
        snapshot_id: Some(bill.snapshot_id()),
    };
    annotate(&service, &mut object);
    Ok(Completion {
        object,
        service,
        native: false,
    })
}

/// The tokens a token-priced operation reports, as the bill meters them;
/// `None` (a local estimate) when the upstream reported none.
fn token_usage(measured: &Measured) -> Option<Usage> {
    let input = measured.input_tokens?;
    Some(Usage {
        input,
        output: measured.output_tokens.unwrap_or(0),
        cache_read: None,
        cache_write: None,
        reasoning: None,
    })
}

/// The answer's provenance, in the operation's own shape: `model` as
/// asked, `usage` with the counts billed (`prompt_tokens`, `total_tokens`;
/// `usage.cost` is written exactly when rendered), `provider` and `service`.
fn annotate(service: &Service, object: &mut Map<String, Value>) {
    object.insert("model".into(), Value::String(service.route.id.clone()));
    if let Some(billed) = service.billed.usage {
        let mut usage = match object.remove("usage") {
            Some(Value::Object(usage)) if service.trail.0.len() == 1 => usage,
            _ => Map::new(),
        };
        usage.insert("prompt_tokens".into(), Value::from(billed.input));
        if billed.output > 0 {
            usage.insert("completion_tokens".into(), Value::from(billed.output));
        }
        usage.insert("total_tokens".into(), Value::from(billed.input + billed.output));
        object.insert("usage".into(), Value::Object(usage));
    }
    object.insert("provider".into(), Value::String(service.route.provider.id.clone()));
    object.insert("service".into(), service.to_json());
}

/// Logs a request refused before anything was held, as its operation's
/// kind, and hands its error back.
async fn refused(
    data: &DataPlane,
    site: &CallSite<'_>,
    caller: &Caller,
    operation: Operation,
    model: Option<&str>,
    error: ApiError,
) -> ApiError {
    super::chat::refused_as(data, site, caller, kind(operation), model, error).await
}
