//! `POST /v1/chat/completions`: authenticate, parse the envelope, resolve the
//! model, reserve the worst-case cost, run the adapter exchange against the
//! upstream, settle, and answer with provenance, as one body or as an SSE stream.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::billing::{Bill, Demand};
use super::envelope::ChatEnvelope;
use super::provenance::{Attempt, Metered, Provenance, render};
use super::stream;
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
    let started = Instant::now();
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::body_too_large(gateway.config.limits.max_body_bytes)
        } else {
            ApiError::invalid_request(format!("Could not read the request body: {rejection}"))
        }
    })?;
    let envelope = ChatEnvelope::parse(&body)?;
    let routes = gateway.routes();
    let route = routes
        .catalog
        .resolve(&envelope.model)
        .ok_or_else(|| ApiError::model_not_found(&envelope.model))?
        .clone();
    let provider = &route.provider;
    if !provider.is_available() {
        let hint = provider
            .api_key_env
            .as_deref()
            .map(|env| format!(" (set {env})"))
            .unwrap_or_default();
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "provider_not_configured",
            format!("provider '{}' has no API key configured{hint}", provider.id),
        ));
    }
    let adapter = gateway.adapters.get(&provider.adapter).ok_or_else(|| {
        ApiError::internal(format!(
            "provider '{}' uses adapter '{}', which is not loaded",
            provider.id, provider.adapter
        ))
    })?;

    // Without a caller-set cap the gateway injects its own, so the cost cannot
    // outgrow the reservation.
    let injected_cap = match envelope.max_output_tokens {
        Some(_) => None,
        None => Some(gateway.config.ledger.default_max_output_tokens),
    };
    let max_output_tokens = envelope
        .max_output_tokens
        .unwrap_or(u64::from(gateway.config.ledger.default_max_output_tokens));
    let demand = Demand {
        request_id: &request_id.0,
        requested_model: &envelope.model,
        streamed: envelope.stream,
        body_bytes: body.len(),
        messages: envelope.messages,
        max_output_tokens,
    };
    let mut bill = Bill::open(
        gateway.ledger.as_ref(),
        &caller.0,
        route.clone(),
        routes.snapshot_id,
        demand,
    )
    .await?;

    let ctx = CallContext {
        request_id: request_id.0.to_string(),
        upstream_model: route.upstream_model.clone(),
        base_url: provider.base_url.clone(),
        stream: envelope.stream,
        attempt: 0,
        max_output_tokens: injected_cap,
    };
    let exchange = Exchange {
        gateway,
        route: &route,
        request_id,
        started,
    };
    match exchange.start(adapter, &ctx, &body).await {
        Err((error, status)) => {
            let provenance = exchange.provenance(Metered::NOTHING, "error", status, bill.snapshot_id());
            bill.close(Metered::NOTHING, error.code, status, provenance.attempts())
                .await;
            Err(error)
        }
        Ok((session, upstream_response)) if envelope.stream => Ok(stream::respond(
            gateway.clone(),
            route.clone(),
            session,
            upstream_response,
            bill,
            request_id.clone(),
            started,
        )),
        Ok((session, upstream_response)) => exchange.whole(session, upstream_response, bill).await,
    }
}

/// One upstream attempt of a request.
struct Exchange<'a> {
    gateway: &'a Arc<Gateway>,
    route: &'a Arc<ModelRoute>,
    request_id: &'a RequestId,
    started: Instant,
}

impl Exchange<'_> {
    /// Opens the adapter session and sends the request; a non-2xx answer is
    /// classified by the adapter. Errors carry the upstream status, if any.
    async fn start(
        &self,
        adapter: &Arc<crate::plugins::LoadedAdapter>,
        ctx: &CallContext,
        body: &[u8],
    ) -> Result<(Session, reqwest::Response), (ApiError, Option<u16>)> {
        let provider = &self.route.provider;
        let mut session = adapter
            .open(ctx, body)
            .map_err(|fault| (ApiError::adapter_fault(&fault), None))?;
        let outbound = session.request().map_err(|e| (exchange_error(self.route, e), None))?;
        let response = self
            .gateway
            .upstream
            .send(provider, outbound)
            .await
            .map_err(|e| (e, None))?;
        if response.status().is_success() {
            return Ok((session, response));
        }
        let head = response_head(&response);
        let body = self
            .gateway
            .upstream
            .read_body(provider, response, 64 << 10)
            .await
            .unwrap_or_default();
        let classified = session
            .classify_error(&head, &body)
            .map_err(|fault| (ApiError::adapter_fault(&fault), Some(head.status)))?;
        Err((ApiError::from_upstream(&provider.id, &classified), Some(head.status)))
    }

    /// Reads and translates a whole response, settles, and answers.
    async fn whole(
        &self,
        mut session: Session,
        response: reqwest::Response,
        mut bill: Bill,
    ) -> Result<Response, ApiError> {
        let provider = &self.route.provider;
        let head = response_head(&response);
        let translated = async {
            let body = self
                .gateway
                .upstream
                .read_body(provider, response, self.gateway.config.limits.max_upstream_body_bytes)
                .await?;
            let translated = session
                .response(&head, &body)
                .map_err(|e| exchange_error(self.route, e))?;
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
        let (mut object, usage) = match translated {
            Ok(parts) => parts,
            Err(error) => {
                // The upstream answered, so it may have charged us: bill a local estimate.
                let metered = bill.meter(None, 1);
                let provenance = self.provenance(metered, "error", Some(head.status), bill.snapshot_id());
                bill.close(metered, error.code, Some(head.status), provenance.attempts())
                    .await;
                return Err(error);
            }
        };

        let metered = bill.meter(usage, 1);
        let snapshot_id = bill.snapshot_id();
        let mut provenance = self.provenance(metered, "success", Some(head.status), snapshot_id);
        provenance.metered = bill
            .close(metered, "success", Some(head.status), provenance.attempts())
            .await;
        provenance.annotate(&mut object);

        let bytes = render(object, provenance.metered.cost);
        let mut response = (StatusCode::OK, bytes).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Ok(value) = HeaderValue::from_str(&self.request_id.0) {
            headers.insert("x-request-id", value);
        }
        Ok(response)
    }

    fn provenance(
        &self,
        metered: Metered,
        outcome: &'static str,
        status: Option<u16>,
        snapshot_id: i64,
    ) -> Provenance<'_> {
        Provenance {
            route: self.route,
            request_id: &self.request_id.0,
            metered,
            attempt: Attempt {
                outcome,
                status,
                latency: self.started.elapsed(),
            },
            snapshot_id: Some(snapshot_id),
        }
    }
}

/// An adapter failure, or an error the adapter reported about the upstream.
pub fn exchange_error(route: &ModelRoute, error: ExchangeError) -> ApiError {
    match error {
        ExchangeError::Fault(fault) => ApiError::adapter_fault(&fault),
        ExchangeError::Reported(reported) => ApiError::from_upstream(&route.provider.id, &reported),
    }
}
