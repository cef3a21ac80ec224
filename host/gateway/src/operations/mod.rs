//! The model operations besides chat (WIT 0.3.0's `operation`: embeddings,
//! images, speech, transcription, moderations, rerank), in the same stages
//! as chat: read what the gateway needs of the request (`request`: the
//! candidates and the units asked for), resolve the candidates that serve
//! the operation, admit (the plan, budgets and the wallet hold of the worst
//! case), try the candidates in order through the one attempt loop, settle
//! what the answer consumed, and answer with the provider, the exact cost
//! and the request id (`answer`).
//!
//! The worst case is every byte of the request counted as an input token at
//! the token prices, plus the units asked for at the unit prices (`n`
//! images of the requested kind, the characters sent, the upload's audio
//! length or its bound, the searches).

mod answer;
pub mod form;
mod request;

use std::collections::VecDeque;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;

use super::DataPlane;
use super::attempts::{Answered, Call, exchange_error, final_error, first_answer};
use super::billing::{Bill, Demand};
use super::envelope::ChatEnvelope;
use super::pipeline::{Answer, CallSite};
use super::provenance::{Attempt, Metered, Service, Trail};
use super::upstream::response_head;
use request::Request;
use tollgate_identity::auth::Caller;
use tollgate_ledger::RequestKind;
use tollgate_plugin_host::{FormPart, Operation, OperationBody};
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

    /// A form upload for `operation` (see [`form::parse`]).
    pub fn form(operation: Operation, parts: Vec<FormPart>) -> Self {
        OperationCall {
            operation,
            body: OperationBody::Form(parts),
        }
    }
}

/// The operation's name in the catalog (`ModelRoute::operations`) and the
/// request log.
pub fn name(operation: Operation) -> &'static str {
    kind(operation).as_str()
}

/// The request-log kind of `operation`.
pub fn kind(operation: Operation) -> RequestKind {
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

/// The operation, start to end.
pub async fn run(
    data: &Arc<DataPlane>,
    call: OperationCall,
    caller: &Caller,
    site: &CallSite<'_>,
) -> Result<Answer, ApiError> {
    let operation = call.operation;
    if data.limits.log_prompts
        && let OperationBody::Json(json) = &call.body
    {
        tracing::info!(body = %String::from_utf8_lossy(json), "operation request body (telemetry.log_prompts is on)");
    }
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
        units: Some(&request.units),
        fixed_cost: tollgate_core::money::Nanos::ZERO,
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
    attempts(data, site, &call, &request, candidates, bill).await
}

/// The candidates in order: `model`, then `models`/`fallbacks`, as routing
/// orders them (groups and `provider` preferences included); every one must
/// serve the operation through an adapter that serves it, and price what is
/// asked of it.
fn candidates(
    data: &DataPlane,
    caller: &Caller,
    operation: Operation,
    request: &Request,
) -> Result<Vec<Arc<ModelRoute>>, ApiError> {
    let envelope = ChatEnvelope {
        model: request.model.as_str().into(),
        stream: false,
        messages: 0,
        max_output_tokens: None,
        fallbacks: request.fallbacks.iter().map(|m| m.as_str().into()).collect(),
        continuation: false,
        provider: request.provider.as_deref(),
        session: None,
    };
    let routes = data.routes();
    let (candidates, _decision) = crate::routing::select(data, &routes, &envelope, b"{}", &caller.0.workspace_id)?;
    let operation_name = name(operation);
    let not_supported = |message: String| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "operation_not_supported",
            message,
        )
    };
    for route in &candidates {
        let param = if route.id == request.model { "model" } else { "models" };
        if !route.serves(operation_name) {
            return Err(not_supported(format!("{}.", route.not_serving(operation_name))).with_param(param));
        }
        let adapter_serves = data
            .adapters
            .get(&route.provider.adapter)
            .is_none_or(|adapter| adapter.serves(operation));
        if !adapter_serves {
            return Err(not_supported(format!(
                "model '{}' is served by adapter '{}', which does not serve {operation_name}.",
                route.id, route.provider.adapter
            ))
            .with_param(param));
        }
        // An image of a kind the model has no price for cannot be billed.
        let (quality, size) = (request.units.quality.as_deref(), request.units.size.as_deref());
        if request.units.counts.images > 0 && route.units.image(quality, size).is_none() {
            let priced: Vec<String> = route.units.images.iter().map(|p| p.key()).collect();
            let kind: Vec<&str> = [quality, size].into_iter().flatten().collect();
            return Err(ApiError::invalid_request(format!(
                "model '{}' has no price for {} images (priced: {}).",
                route.id,
                kind.join(" "),
                if priced.is_empty() {
                    "none".to_string()
                } else {
                    priced.join(", ")
                }
            ))
            .with_param("size"));
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
    request: &Request,
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
        Ok(answered) => whole(data, request_id, call.operation, request, answered, bill, trail).await,
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
    operation: Operation,
    request: &Request,
    answered: Answered,
    mut bill: Bill,
    mut trail: Trail,
) -> Result<Answer, ApiError> {
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
    let answer = translated.and_then(|answer| answer::Answer::read(answer, &route));
    let image_price = request.units.image_price(&route);
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            if error.is_health_failure() {
                data.health.failed_after_answer(&route.id);
                flight.failed();
            }
            // The upstream answered, so it may have charged us: bill what
            // the request asked for.
            let metered = bill.meter_operation(&route, None, request.units.counts, image_price, false);
            trail.push(attempt(error.code, metered));
            bill.close(Some(&route), &trail, error.code, status).await;
            return Err(error.with_attempts(trail.to_json()));
        }
    };
    let measured = session
        .measured()
        .map_err(|fault| crate::adapter_errors::fault(&fault))?;
    let consumed = answer::Consumed::of(operation, measured.as_ref(), request);
    let metered = bill.meter_operation(&route, consumed.tokens, consumed.units, image_price, consumed.reported);
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
    Ok(answer.finish(operation, service, &consumed))
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
