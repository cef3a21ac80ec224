//! `POST /v1/billing/stripe/webhook`: the processor's deliveries. No API key:
//! the signature is the authentication.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::WebhookError;
use crate::Billing;
use tollgate_audit::{Actor, ActorKind, Change};
use tollgate_web::error::ApiError;

pub const WEBHOOK_PATH: &str = "/v1/billing/stripe/webhook";

/// Stripe's events are a few KB; anything far larger is not one.
const MAX_PAYLOAD_BYTES: usize = 512 * 1024;

pub fn routes<S>() -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Billing>: FromRef<S>,
{
    axum::Router::new().route(WEBHOOK_PATH, post(webhook))
}

async fn webhook(State(billing): State<Arc<Billing>>, headers: HeaderMap, payload: Bytes) -> Response {
    let Some(payments) = billing.payments() else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "payments_not_configured",
            "this gateway takes no payments: [billing.stripe] is not configured",
        )
        .into_response();
    };
    if payload.len() > MAX_PAYLOAD_BYTES {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "payload_too_large",
            format!("a webhook delivery is at most {MAX_PAYLOAD_BYTES} bytes"),
        )
        .into_response();
    }
    let signature = headers.get("stripe-signature").and_then(|v| v.to_str().ok());
    match payments.webhook(signature, &payload, billing.plans()).await {
        Ok(handled) => {
            if let Some(workspace_id) = &handled.plan_changed {
                billing.forget_plan(workspace_id);
            }
            if let Some(workspace_id) = &handled.workspace_id {
                let change = Change::new("payments.webhook", Actor::of_kind(ActorKind::Processor))
                    .workspace(workspace_id.clone())
                    .target(serde_json::json!({"event_id": handled.event_id, "type": handled.event_type}))
                    .after(serde_json::json!({"outcome": handled.outcome}));
                billing.audit().record(change).await;
            }
            tracing::debug!(event = %handled.event_id, outcome = handled.outcome, "payment event handled");
            (
                StatusCode::OK,
                axum::Json(serde_json::json!({"received": true, "event": handled})),
            )
                .into_response()
        }
        Err(WebhookError::Refused(message)) => {
            tracing::warn!(%message, "payment webhook refused");
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "webhook_refused",
                message,
            )
            .into_response()
        }
        Err(WebhookError::RetryLater(message)) => {
            ApiError::new(StatusCode::CONFLICT, "conflict_error", "deliver_later", message).into_response()
        }
        Err(WebhookError::Internal(error)) => {
            tracing::error!(error = %format!("{error:#}"), "payment webhook failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                "internal_error",
                "the event could not be handled; it changed nothing and can be delivered again",
            )
            .into_response()
        }
    }
}
