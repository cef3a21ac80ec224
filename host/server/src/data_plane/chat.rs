//! `POST /v1/chat/completions`: authenticate, parse the envelope, resolve the
//! candidates (`model`, then `models`/`fallbacks`), reserve the worst case over
//! them, try them in order until one answers, settle, and answer with
//! provenance, as one body or as an SSE stream.
//!
//! A candidate is abandoned for the next on 429, 5xx, rate-limit/overload
//! errors, connect errors, timeouts and adapter faults; a request the upstream
//! calls invalid (other 4xx) is not retried elsewhere. Failing over before the
//! answer starts is invisible to the caller apart from `service.attempts`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::DataPlane;
use super::Routes;
use super::attempts::{Call, NativeBody, exchange_error, final_error, first_answer, output_cap};
use super::billing::{Bill, CostCeiling, Demand};
use super::envelope::ChatEnvelope;
use super::provenance::{Attempt, Metered, Provenance, Trail, render};
use super::stream::{self, Failover};
use super::upstream::response_head;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::server::RequestId;
use tollgate_plugin_host::Session;
use tollgate_routing::catalog::ModelRoute;

pub async fn chat_completions(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match handle(&data, &request_id, None, &caller, body, StreamFailure::Chunk, None).await {
        Ok(response) => response,
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}

/// How a streamed request whose every candidate failed before any content is
/// answered: as a stream ending in one error chunk (chat completions), or as
/// the error itself, so an ingress protocol can answer it with an HTTP status
/// in its own error shape.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum StreamFailure {
    Chunk,
    Status,
}

/// A chat-completions body translated by an ingress protocol
/// (`data_plane::ingress`), through the whole pipeline. Errors come back
/// unrendered, for the protocol's own error shape.
pub async fn translated(
    data: &Arc<DataPlane>,
    request_id: &RequestId,
    caller: &Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    handle(data, request_id, None, caller, Ok(body), StreamFailure::Status, None).await
}

/// The caller's request in a provider's own dialect, beside its chat form.
pub struct NativeRequest {
    /// E.g. `anthropic-messages`.
    pub dialect: &'static str,
    /// The caller's body, with the gateway's own fields removed.
    pub body: Bytes,
    /// The request carries what only the dialect can (e.g. `document`
    /// blocks): candidates whose adapter would translate it are dropped.
    pub required: bool,
    /// Caller headers a native upstream request carries (`anthropic-beta`).
    pub headers: Vec<(String, String)>,
}

/// Marks an answer relayed in the native dialect (a whole answer with
/// `provider`, `service` and `usage.cost` added, or the dialect's SSE
/// stream), which the ingress protocol passes on as it is.
#[derive(Clone, Copy, Debug)]
pub struct NativeAnswer;

/// Like [`translated`], with the native body for candidates whose adapter
/// takes its dialect (WIT 0.2.0): those are opened natively, the others get
/// the chat body. The answer carries [`NativeAnswer`] when a native
/// candidate answered.
pub async fn translated_or_native(
    data: &Arc<DataPlane>,
    request_id: &RequestId,
    caller: &Caller,
    body: Bytes,
    native: NativeRequest,
) -> Result<Response, ApiError> {
    handle(
        data,
        request_id,
        None,
        caller,
        Ok(body),
        StreamFailure::Status,
        Some(&native),
    )
    .await
}

/// What a chat completion inside another request carries: the request it
/// runs inside (its log row is linked to it) and, for a hosted actor's run,
/// the run's budget.
pub struct Nested<'a> {
    pub parent: &'a str,
    pub ceiling: Option<&'a dyn CostCeiling>,
}

/// A chat completion inside another request (a skill's or an actor's model
/// call): the same pipeline.
pub async fn nested(
    data: Arc<DataPlane>,
    request_id: RequestId,
    nested: Nested<'_>,
    caller: Caller,
    body: Bytes,
) -> Response {
    match handle(
        &data,
        &request_id,
        Some(&nested),
        &caller,
        Ok(body),
        StreamFailure::Chunk,
        None,
    )
    .await
    {
        Ok(response) => response,
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}

async fn handle(
    data: &Arc<DataPlane>,
    request_id: &RequestId,
    nested: Option<&Nested<'_>>,
    caller: &Caller,
    body: Result<Bytes, BytesRejection>,
    stream_failure: StreamFailure,
    native: Option<&NativeRequest>,
) -> Result<Response, ApiError> {
    let parent = nested.map(|n| n.parent);
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            return Err(refused(data, request_id, parent, caller, None, body_error(data, &rejection)).await);
        }
    };
    if data.limits.log_prompts {
        tracing::info!(body = %String::from_utf8_lossy(&body), "chat request body (telemetry.log_prompts is on)");
    }
    let envelope = match ChatEnvelope::parse(&body) {
        Ok(envelope) => envelope,
        Err(error) => return Err(refused(data, request_id, parent, caller, None, error).await),
    };
    let routes = data.routes();
    let mut candidates = match resolve_candidates(&routes, &envelope, data.ledger.is_some()) {
        Ok(candidates) => candidates,
        Err(error) => return Err(refused(data, request_id, parent, caller, Some(&envelope.model), error).await),
    };
    if let Some(native) = native.filter(|n| n.required) {
        // Only an adapter that takes the dialect natively can carry the request.
        candidates.retain(|route| {
            data.adapters
                .get(&route.provider.adapter)
                .is_some_and(|adapter| adapter.takes_natively(native.dialect))
        });
        if candidates.is_empty() {
            let error = ApiError::invalid_request(format!(
                "This request has content that only a provider taking '{}' natively can serve \
                 (e.g. 'document' blocks), and no candidate model's provider does.",
                native.dialect
            ))
            .with_param("messages");
            return Err(refused(data, request_id, parent, caller, Some(&envelope.model), error).await);
        }
    }

    // A limit above a candidate's maximum output is one its provider refuses:
    // refused here, before anything is held for it.
    if let Some((limit, route)) = envelope.max_output_tokens.and_then(|limit| {
        candidates
            .iter()
            .find(|route| route.max_output_tokens.is_some_and(|max| limit > max))
            .map(|route| (limit, route))
    }) {
        let error = ApiError::invalid_request(format!(
            "The output limit {limit} exceeds the maximum output of model '{}' ({} tokens).",
            route.id,
            route.max_output_tokens.unwrap_or_default()
        ))
        .with_param("max_tokens");
        return Err(refused(data, request_id, parent, caller, Some(&envelope.model), error).await);
    }
    // Without a caller-set limit the gateway sends each model's own maximum
    // (the gateway default where the catalog does not know it), so the cost
    // cannot outgrow the reservation, which holds the largest of them.
    let default_cap = data.limits.default_max_output_tokens;
    let injected_cap = envelope.max_output_tokens.is_none().then_some(default_cap);
    let held_output = envelope.max_output_tokens.unwrap_or_else(|| {
        candidates
            .iter()
            .map(|route| u64::from(output_cap(route, default_cap)))
            .max()
            .unwrap_or(u64::from(default_cap))
    });
    // The plan's monthly limit is checked before anything is reserved or sent
    // upstream. With the ledger off requests are neither limited nor billed.
    let admitted = match data.admit(&caller.0).await {
        Ok(admitted) => admitted,
        Err(error) => {
            return Err(refused(
                data,
                request_id,
                parent,
                caller,
                Some(&envelope.model),
                plan_error(error),
            )
            .await);
        }
    };
    let demand = Demand {
        request_id: &request_id.0,
        parent_request_id: parent,
        requested_model: &envelope.model,
        streamed: envelope.stream,
        body_bytes: body.len(),
        messages: envelope.messages,
        max_output_tokens: held_output,
        may_continue: envelope.stream && envelope.continuation && candidates.len() > 1,
        ceiling: nested.and_then(|n| n.ceiling),
        admitted,
    };
    let mut bill = Bill::open(
        data.ledger.as_ref(),
        &data.request_log,
        &caller.0,
        &candidates,
        routes.snapshot_id,
        demand,
    )
    .await?;

    let mut trail = Trail::default();
    let mut remaining: VecDeque<Arc<ModelRoute>> = candidates.iter().cloned().collect();
    let call = Call {
        request_id: &request_id.0,
        body: &body,
        native: native.map(|n| NativeBody {
            dialect: n.dialect,
            body: &n.body,
            headers: &n.headers,
        }),
        stream: envelope.stream,
        injected_cap,
        continuation: None,
    };
    let mut attempt = 0;
    match first_answer(data, &mut remaining, &call, &mut attempt, &mut bill, &mut trail).await {
        Ok(answered) if envelope.stream => {
            let native = answered.session.is_native();
            let failover = Failover {
                remaining,
                body: body.clone(),
                injected_cap,
                enabled: envelope.continuation,
                attempt,
            };
            let mut response = stream::respond(data.clone(), answered, bill, trail, failover, request_id.clone());
            if native {
                response.extensions_mut().insert(NativeAnswer);
            }
            Ok(response)
        }
        Ok(answered) => {
            let exchange = Exchange {
                data,
                route: &answered.route,
                request_id,
                started: answered.started,
            };
            exchange.whole(answered.session, answered.response, bill, trail).await
        }
        Err(error) => {
            let status = trail.0.last().and_then(|a| a.status);
            // A request the upstream rejected as invalid keeps its 4xx.
            let upstream_failed = error.is_retryable();
            let error = final_error(error, &trail);
            let billed = bill.close(None, &trail, error.code, status).await;
            // A stream whose upstreams all failed still answers as a stream,
            // ending in one error chunk.
            if envelope.stream && upstream_failed && stream_failure == StreamFailure::Chunk {
                let last = &trail.0.last().expect("a failed candidate is in the trail").route;
                return Ok(stream::failed(
                    request_id,
                    last,
                    &trail,
                    billed,
                    bill.snapshot_id(),
                    &error,
                ));
            }
            Err(error.with_attempts(trail.to_json()))
        }
    }
}

/// Logs a request refused before anything was reserved (a body that could
/// not be read or parsed, an unknown or unpriced model) and hands its error
/// back: every authenticated request leaves a trace, refused or not. The row
/// bills nothing, and no usage event is made of it (see metering's feed).
pub async fn refused(
    data: &DataPlane,
    request_id: &RequestId,
    parent: Option<&str>,
    caller: &Caller,
    model: Option<&str>,
    error: ApiError,
) -> ApiError {
    {
        let row = tollgate_ledger::RequestLogRow {
            outcome: error.code.to_string(),
            status: Some(error.status.as_u16()),
            started_at_ms: tollgate_core::db::now_ms(),
            parent_request_id: parent.map(str::to_string),
            ..tollgate_ledger::RequestLogRow::unbilled(
                tollgate_ledger::RequestKind::Chat,
                request_id.0.to_string(),
                caller.0.key_id.clone(),
                caller.0.workspace_id.clone(),
                model.unwrap_or_default().to_string(),
            )
        };
        if let Err(failure) = data.request_log().log(row).await {
            tracing::warn!(request_id = %request_id.0, %failure, "could not log a refused request");
        }
    }
    error
}

/// A request the workspace's plan refuses: 429 `plan_limit_reached` past the
/// monthly limit; a plan this gateway does not define is a configuration error.
fn plan_error(error: crate::billing::BillingError) -> ApiError {
    use crate::billing::BillingError;
    match error {
        BillingError::LimitReached { .. } => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "billing_error",
            "plan_limit_reached",
            error.to_string(),
        ),
        BillingError::UnknownPlan { .. } => {
            tracing::error!(%error, "workspace on an undefined plan");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                "unknown_plan",
                error.to_string(),
            )
        }
        BillingError::Database(_) | BillingError::Other(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "ledger_unavailable",
            format!("The plan's request counter could not be read or written: {error}"),
        ),
    }
}

/// A request body that could not be read: too large, or cut off.
pub fn body_error(data: &DataPlane, rejection: &BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::body_too_large(data.limits.max_body_bytes)
    } else {
        ApiError::invalid_request(format!("Could not read the request body: {rejection}"))
    }
}

/// `model` followed by the fallbacks, each resolved in the catalog (404 for an
/// unknown one, before anything is reserved). Duplicates are tried once. With
/// the wallet ledger on, a model without a price cannot be billed and is refused.
fn resolve_candidates(
    routes: &Routes,
    envelope: &ChatEnvelope<'_>,
    billing: bool,
) -> Result<Vec<Arc<ModelRoute>>, ApiError> {
    let mut candidates: Vec<Arc<ModelRoute>> = Vec::with_capacity(1 + envelope.fallbacks.len());
    for (index, name) in std::iter::once(&envelope.model).chain(&envelope.fallbacks).enumerate() {
        let param = |error: ApiError| if index == 0 { error } else { error.with_param("models") };
        let route = routes
            .catalog
            .resolve(name)
            .ok_or_else(|| param(ApiError::model_not_found(name)))?;
        if billing && let Some(reason) = route.unpriced_reason() {
            return Err(param(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "model_unpriced",
                format!("Model '{name}' cannot be billed: {reason}."),
            )));
        }
        if !candidates.iter().any(|c| Arc::ptr_eq(c, route)) {
            candidates.push(route.clone());
        }
    }
    Ok(candidates)
}

/// One upstream attempt of a request.
struct Exchange<'a> {
    data: &'a Arc<DataPlane>,
    route: &'a Arc<ModelRoute>,
    request_id: &'a RequestId,
    started: Instant,
}

impl Exchange<'_> {
    /// Reads and translates a whole response, settles, and answers.
    async fn whole(
        &self,
        mut session: Session,
        response: reqwest::Response,
        mut bill: Bill,
        mut trail: Trail,
    ) -> Result<Response, ApiError> {
        let provider = &self.route.provider;
        let head = response_head(&response);
        let native = session.is_native();
        let translated = async {
            let body = self
                .data
                .upstream
                .read_body(provider, response, self.data.limits.max_upstream_body_bytes)
                .await?;
            let translated = {
                let _span = crate::telemetry::adapter_span(&provider.adapter, "response").entered();
                session
                    .response(&head, &body)
                    .map_err(|e| exchange_error(self.route, e))?
            };
            let object: Map<String, Value> = serde_json::from_slice(&translated).map_err(|e| {
                ApiError::adapter_refused(&provider.adapter, format!("output is not a JSON object: {e}"))
            })?;
            let usage = session.usage().map_err(|fault| ApiError::adapter_fault(&fault))?;
            Ok::<_, ApiError>((object, usage))
        }
        .await;
        drop(session);
        let status = Some(head.status);
        let (mut object, usage) = match translated {
            Ok(parts) => parts,
            Err(error) => {
                if error.is_health_failure() {
                    self.data.health.failed_after_answer(&self.route.id);
                }
                // The upstream answered, so it may have charged us: bill a local estimate.
                let metered = bill.meter(self.route, None, 1);
                trail.push(self.attempt(error.code, status, metered));
                bill.close(Some(self.route), &trail, error.code, status).await;
                return Err(error.with_attempts(trail.to_json()));
            }
        };

        let metered = bill.meter(self.route, usage, 1);
        trail.push(self.attempt("success", status, metered));
        let billed = bill.close(Some(self.route), &trail, "success", status).await;
        let provenance = Provenance {
            route: self.route,
            request_id: &self.request_id.0,
            metered: billed,
            trail: &trail,
            snapshot_id: Some(bill.snapshot_id()),
        };
        if native {
            provenance.annotate_native(&mut object);
            // The id the caller asked for; the upstream's name is in `service`.
            object.insert("model".into(), Value::String(self.route.id.clone()));
        } else {
            provenance.annotate(&mut object);
        }

        let bytes = render(object, billed.cost);
        let mut response = (StatusCode::OK, bytes).into_response();
        if native {
            response.extensions_mut().insert(NativeAnswer);
        }
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Ok(value) = HeaderValue::from_str(&self.request_id.0) {
            headers.insert("x-request-id", value);
        }
        Ok(response)
    }

    fn attempt(&self, outcome: &str, status: Option<u16>, metered: Metered) -> Attempt {
        Attempt {
            route: self.route.clone(),
            outcome: outcome.to_string(),
            status,
            latency: self.started.elapsed(),
            metered,
        }
    }
}
