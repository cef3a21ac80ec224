//! `POST /v1/chat/completions`: authenticate, parse the envelope, resolve the
//! candidates (`model`, then `models`/`fallbacks`), reserve the worst case over
//! them, try them in order until one answers, settle, and answer with
//! provenance, as one body or as an SSE stream.
//!
//! A candidate is abandoned for the next on 429, 5xx, rate-limit/overload
//! errors, connect errors, timeouts and adapter faults; a request the upstream
//! calls invalid (other 4xx) is not retried elsewhere. Failing over before the
//! answer starts is invisible to the caller apart from `service.attempts`.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::Routes;
use super::billing::{Bill, Demand};
use super::envelope::ChatEnvelope;
use super::provenance::{Attempt, Metered, Provenance, Trail, render};
use super::stream::{self, Answering, Failover};
use super::upstream::response_head;
use crate::catalog::ModelRoute;
use crate::error::ApiError;
use crate::plugins::{AdapterError, CallContext, ErrorClass, ExchangeError, Session};
use crate::server::{Caller, Gateway, RequestId};

pub async fn chat_completions(
    State(gateway): State<Arc<Gateway>>,
    request_id: RequestId,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match handle(&gateway, &request_id, &caller, body).await {
        Ok(response) => response,
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}

async fn handle(
    gateway: &Arc<Gateway>,
    request_id: &RequestId,
    caller: &Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::body_too_large(gateway.config.limits.max_body_bytes)
        } else {
            ApiError::invalid_request(format!("Could not read the request body: {rejection}"))
        }
    })?;
    if gateway.config.telemetry.log_prompts {
        tracing::info!(body = %String::from_utf8_lossy(&body), "chat request body (telemetry.log_prompts is on)");
    }
    let envelope = ChatEnvelope::parse(&body)?;
    let routes = gateway.routes();
    let candidates = resolve_candidates(&routes, &envelope, gateway.ledger.is_some())?;

    // Without a caller-set cap the gateway injects its own, so the cost cannot
    // outgrow the reservation.
    let default_cap = gateway.config.ledger.default_max_output_tokens;
    let injected_cap = envelope.max_output_tokens.is_none().then_some(default_cap);
    let demand = Demand {
        request_id: &request_id.0,
        requested_model: &envelope.model,
        streamed: envelope.stream,
        body_bytes: body.len(),
        messages: envelope.messages,
        max_output_tokens: envelope.max_output_tokens.unwrap_or(u64::from(default_cap)),
        may_continue: envelope.stream && envelope.continuation && candidates.len() > 1,
    };
    let mut bill = Bill::open(
        gateway.ledger.as_ref(),
        &caller.0,
        &candidates,
        routes.snapshot_id,
        demand,
    )
    .await?;

    let mut trail = Trail::default();
    let mut last_error = None;
    for (attempt, route) in candidates.iter().enumerate() {
        let started = Instant::now();
        let exchange = Exchange {
            gateway,
            route,
            request_id,
            started,
        };
        let ctx = CallContext {
            request_id: request_id.0.to_string(),
            upstream_model: route.upstream_model.clone(),
            base_url: route.provider.base_url.clone(),
            stream: envelope.stream,
            attempt: attempt as u32,
            max_output_tokens: injected_cap,
            continuation: None,
        };
        bill.calling(route);
        let started_exchange = exchange.start(&ctx, &body).await;
        bill.landed();
        match started_exchange {
            Ok((session, upstream)) if envelope.stream => {
                let answering = Answering {
                    route: route.clone(),
                    session,
                    upstream,
                    started,
                };
                let failover = Failover {
                    remaining: candidates[attempt + 1..].iter().cloned().collect(),
                    body: body.clone(),
                    injected_cap,
                    enabled: envelope.continuation,
                    attempt: attempt as u32,
                };
                return Ok(stream::respond(
                    gateway.clone(),
                    answering,
                    bill,
                    trail,
                    failover,
                    request_id.clone(),
                ));
            }
            Ok((session, upstream)) => return exchange.whole(session, upstream, bill, trail).await,
            Err((error, status)) => {
                trail.push(Attempt {
                    route: route.clone(),
                    outcome: error.code.to_string(),
                    status,
                    latency: started.elapsed(),
                    metered: Metered::NOTHING,
                });
                let retryable = error.is_retryable();
                last_error = Some((error, status));
                if !retryable {
                    break;
                }
            }
        }
    }

    let (error, status) = last_error.expect("there is at least one candidate");
    // The last candidate's own error when it ended the search (a request the
    // upstream rejected), a summary when candidates ran out.
    let upstream_failed = error.is_retryable();
    let error = if upstream_failed && trail.0.len() > 1 {
        all_failed(&trail)
    } else {
        error
    };
    let billed = bill.close(None, &trail, error.code, status).await;
    // A stream whose upstreams all failed still answers as a stream, ending in
    // one error chunk; a request the upstream rejected as invalid keeps its 4xx.
    if envelope.stream && upstream_failed {
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

fn all_failed(trail: &Trail) -> ApiError {
    let summary: Vec<String> = trail
        .0
        .iter()
        .map(|a| format!("{}/{}: {}", a.route.provider.id, a.route.upstream_model, a.outcome))
        .collect();
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "upstream_error",
        "all_candidates_failed",
        format!("Every candidate failed ({}).", summary.join("; ")),
    )
}

/// One upstream attempt of a request.
struct Exchange<'a> {
    gateway: &'a Arc<Gateway>,
    route: &'a Arc<ModelRoute>,
    request_id: &'a RequestId,
    started: Instant,
}

impl Exchange<'_> {
    async fn start(
        &self,
        ctx: &CallContext,
        body: &[u8],
    ) -> Result<(Session, reqwest::Response), (ApiError, Option<u16>)> {
        start_exchange(self.gateway, self.route, ctx, body).await
    }

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
        let translated = async {
            let body = self
                .gateway
                .upstream
                .read_body(provider, response, self.gateway.config.limits.max_upstream_body_bytes)
                .await?;
            let translated = {
                let _span = crate::telemetry::adapter_span(&provider.adapter, "response").entered();
                session
                    .response(&head, &body)
                    .map_err(|e| exchange_error(self.route, e))?
            };
            let object: Map<String, Value> = serde_json::from_slice(&translated).map_err(|e| {
                ApiError::from_upstream(
                    &provider.id,
                    &AdapterError {
                        class: ErrorClass::Internal,
                        message: format!("adapter output is not a JSON object: {e}"),
                    },
                )
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
        provenance.annotate(&mut object);

        let bytes = render(object, billed.cost);
        let mut response = (StatusCode::OK, bytes).into_response();
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

/// Opens the adapter session for `route` and sends the request; a non-2xx
/// answer is classified by the adapter. Errors carry the upstream status, if any.
pub async fn start_exchange(
    gateway: &Gateway,
    route: &Arc<ModelRoute>,
    ctx: &CallContext,
    body: &[u8],
) -> Result<(Session, reqwest::Response), (ApiError, Option<u16>)> {
    let provider = &route.provider.id;
    if !gateway.health.admit(provider) {
        let error = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "provider_circuit_open",
            format!("provider '{provider}' is skipped after repeated failures; it is retried after a cooldown"),
        );
        return Err((error, None));
    }
    let started = send_to_upstream(gateway, route, ctx, body).await;
    match &started {
        Ok(_) => gateway.health.success(provider),
        Err((error, _)) if error.is_provider_failure() => {
            let retry_after = error
                .retry_after
                .map(|secs| std::time::Duration::from_secs(u64::from(secs)));
            gateway.health.failure(provider, retry_after);
        }
        Err(_) => {}
    }
    started
}

async fn send_to_upstream(
    gateway: &Gateway,
    route: &Arc<ModelRoute>,
    ctx: &CallContext,
    body: &[u8],
) -> Result<(Session, reqwest::Response), (ApiError, Option<u16>)> {
    let provider = &route.provider;
    if let Some(reason) = provider.unavailable_reason() {
        let error = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "provider_not_configured",
            format!("provider '{}' is not configured: {reason}", provider.id),
        );
        return Err((error, None));
    }
    let adapter = gateway.adapters.get(&provider.adapter).ok_or_else(|| {
        let message = format!(
            "provider '{}' uses adapter '{}', which is not loaded",
            provider.id, provider.adapter
        );
        (ApiError::internal(message), None)
    })?;
    let mut session = adapter
        .open(ctx, body)
        .map_err(|fault| (ApiError::adapter_fault(&fault), None))?;
    let outbound = {
        let _span = crate::telemetry::adapter_span(&provider.adapter, "request").entered();
        session.request().map_err(|e| (exchange_error(route, e), None))?
    };
    let response = gateway.upstream.send(provider, outbound).await.map_err(|e| (e, None))?;
    if response.status().is_success() {
        return Ok((session, response));
    }
    let head = response_head(&response);
    let body = gateway
        .upstream
        .read_body(provider, response, 64 << 10)
        .await
        .unwrap_or_default();
    let classified = session
        .classify_error(&head, &body)
        .map_err(|fault| (ApiError::adapter_fault(&fault), Some(head.status)))?;
    Err((ApiError::from_upstream(&provider.id, &classified), Some(head.status)))
}

/// An adapter failure, or an error the adapter reported about the upstream.
pub fn exchange_error(route: &ModelRoute, error: ExchangeError) -> ApiError {
    match error {
        ExchangeError::Fault(fault) => ApiError::adapter_fault(&fault),
        ExchangeError::Reported(reported) => ApiError::from_upstream(&route.provider.id, &reported),
    }
}
