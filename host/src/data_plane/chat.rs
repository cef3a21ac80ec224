//! `POST /v1/chat/completions`: authenticate, parse the envelope, resolve the
//! model, run the adapter exchange against the upstream, and answer with
//! provenance, either as one body or as an SSE stream.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::envelope::ChatEnvelope;
use super::provenance::{Attempt, Metered, annotate, render};
use super::stream;
use super::upstream::response_head;
use crate::catalog::ModelRoute;
use crate::error::ApiError;
use crate::plugins::{AdapterError, CallContext, ErrorClass, ExchangeError};
use crate::server::{Caller, Gateway, RequestId};

pub async fn chat_completions(
    State(gateway): State<Arc<Gateway>>,
    request_id: RequestId,
    _caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match handle(&gateway, &request_id, body).await {
        Ok(response) => response,
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}

async fn handle(
    gateway: &Arc<Gateway>,
    request_id: &RequestId,
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
    let route = gateway
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

    let ctx = CallContext {
        request_id: request_id.0.to_string(),
        upstream_model: route.upstream_model.clone(),
        base_url: provider.base_url.clone(),
        stream: envelope.stream,
        attempt: 0,
    };
    let mut session = adapter
        .open(&ctx, &body)
        .map_err(|fault| ApiError::adapter_fault(&fault))?;
    let outbound = session.request().map_err(|e| exchange_error(&route, e))?;
    let upstream_response = gateway.upstream.send(provider, outbound).await?;

    let head = response_head(&upstream_response);
    if !upstream_response.status().is_success() {
        let body = gateway
            .upstream
            .read_body(provider, upstream_response, 64 << 10)
            .await
            .unwrap_or_default();
        let classified = session
            .classify_error(&head, &body)
            .map_err(|fault| ApiError::adapter_fault(&fault))?;
        return Err(ApiError::from_upstream(&provider.id, &classified));
    }

    if envelope.stream {
        return Ok(stream::respond(
            gateway.clone(),
            route,
            session,
            upstream_response,
            request_id.clone(),
            started,
        ));
    }

    let body = gateway
        .upstream
        .read_body(
            provider,
            upstream_response,
            gateway.config.limits.max_upstream_body_bytes,
        )
        .await?;
    let translated = session.response(&head, &body).map_err(|e| exchange_error(&route, e))?;
    let usage = session.usage().map_err(|fault| ApiError::adapter_fault(&fault))?;
    drop(session);

    let mut object: Map<String, Value> = serde_json::from_slice(&translated).map_err(|e| {
        ApiError::from_upstream(
            &provider.id,
            &AdapterError {
                class: ErrorClass::Internal,
                message: format!("adapter output is not a JSON object: {e}"),
            },
        )
    })?;
    let metered = Metered::price(&route, usage);
    let attempt = Attempt {
        outcome: "success",
        status: Some(head.status),
        latency: started.elapsed(),
    };
    annotate(&mut object, &route, &request_id.0, &metered, &attempt);

    let bytes = render(object, metered.cost);
    let mut response = (StatusCode::OK, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(value) = HeaderValue::from_str(&request_id.0) {
        headers.insert("x-request-id", value);
    }
    Ok(response)
}

/// An adapter failure, or an error the adapter reported about the upstream.
pub fn exchange_error(route: &ModelRoute, error: ExchangeError) -> ApiError {
    match error {
        ExchangeError::Fault(fault) => ApiError::adapter_fault(&fault),
        ExchangeError::Reported(reported) => ApiError::from_upstream(&route.provider.id, &reported),
    }
}
