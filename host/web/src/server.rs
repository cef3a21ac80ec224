//! Serving HTTP: request ids, the layers around the concerns' routes (which
//! the binary's wiring merges and gives their state), and the listener. How
//! client connections are treated, `[server]` (`config.rs`), is split by what
//! it guards:
//! - `listener.rs`: the accept loop, connection caps, the graceful drain;
//! - `connection.rs`: header and keep-alive deadlines of a connection;
//! - `admission.rs`: load shedding and request-body deadlines;
//! - `health.rs`: `/healthz` and `/readyz`;
//! - `origins.rs`: the gateway's own origin, and which browser origins may
//!   call it.

use std::sync::Arc;

mod admission;
mod config;
mod connection;
mod health;
mod listener;
mod origins;

use anyhow::Context;
use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::FutureExt;

pub use admission::Admission;
pub use config::ServerConfig;
pub use health::{Readiness, UnloadedAdapters};
pub use listener::{AfterResponse, Lifecycle};
pub use origins::Origins;

use crate::error::ApiError;
use crate::rate_limit::TrustedProxy;

/// The concerns' `routes` with what every request passes: health, the
/// fallbacks, the body limit, admission (load shedding, the drain) and the
/// request id, outermost.
pub fn router<S: Clone + Send + Sync + 'static>(
    routes: Router<S>,
    state: S,
    body_limit: usize,
    lifecycle: &Lifecycle,
) -> Router {
    let readiness = lifecycle.readiness.clone();
    routes
        .route(health::HEALTHZ, get(health::healthz))
        .route(
            health::READYZ,
            get(move |request_id: RequestId| health::readyz(readiness.clone(), request_id)),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            lifecycle.admission.clone(),
            admission::admit,
        ))
        .layer(middleware::from_fn(assign_request_id))
        .with_state(state)
}

/// Binds `listen` and serves `router` until `shutdown` resolves and the
/// requests in flight have drained; `ready` gets the bound address once
/// connections are accepted (the CLI prints its first-start hints then).
pub async fn serve(
    listen: &str,
    router: Router,
    config: &ServerConfig,
    trusted_proxies: Vec<TrustedProxy>,
    lifecycle: Lifecycle,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(std::net::SocketAddr),
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr()?;
    tracing::info!("tollgate listening on http://{address}");
    // The banner goes to stdout: stderr carries only log lines (JSON when piped).
    println!("tollgate listening on http://{address}");
    ready(address);
    listener::run(listener, router, config, trusted_proxies, lifecycle, shutdown).await;
    Ok(())
}

/// The request's id, assigned before anything else runs.
#[derive(Clone, Debug)]
pub struct RequestId(pub Arc<str>);

impl RequestId {
    /// A fresh id, `req_<uuid v7>`: time-ordered, unique across gateways.
    pub fn new() -> Self {
        RequestId(Arc::from(format!("req_{}", uuid::Uuid::now_v7().simple())))
    }
}

impl Default for RequestId {
    fn default() -> Self {
        Self::new()
    }
}

async fn assign_request_id(mut request: Request, next: Next) -> Response {
    let id = RequestId::new();
    request.extensions_mut().insert(id.clone());
    let span = tollgate_telemetry::server_span(
        request.method().as_str(),
        request.uri().path(),
        &id.0,
        request.headers(),
    );
    // A panicking handler fails only its own request, in the documented shape.
    let handled = std::panic::AssertUnwindSafe(next.run(request)).catch_unwind();
    let mut response = match tracing::Instrument::instrument(handled, span.clone()).await {
        Ok(response) => response,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(request_id = %id.0, panic = %what, "request handler panicked");
            ApiError::internal("The gateway failed while handling this request; it has been logged.")
                .with_request_id(&id.0)
                .into_response()
        }
    };
    // Only the exported span has the field (recording it re-serialises the
    // log layer's JSON of the span's fields).
    if tollgate_telemetry::exporting() {
        span.record("http.response.status_code", i64::from(response.status().as_u16()));
    }
    if !response.headers().contains_key("x-request-id")
        && let Ok(value) = HeaderValue::from_str(&id.0)
    {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(|| RequestId(Arc::from("req_unknown"))))
    }
}

async fn not_found(request_id: RequestId, request: Request) -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "not_found",
        format!("No route for {} {}.", request.method(), request.uri().path()),
    )
    .with_request_id(&request_id.0)
    .into_response()
}

async fn method_not_allowed(request_id: RequestId, request: Request) -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "method_not_allowed",
        format!("{} is not allowed on {}.", request.method(), request.uri().path()),
    )
    .with_request_id(&request_id.0)
    .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt;

    use super::*;

    async fn boom() -> &'static str {
        panic!("handler bug")
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_with_the_request_id() {
        let app: Router = Router::new()
            .route("/boom", get(boom))
            .route("/ok", get(|| async { "ok" }))
            .layer(middleware::from_fn(assign_request_id));
        let response = app
            .clone()
            .oneshot(Request::get("/boom").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let id = response.headers()["x-request-id"].to_str().unwrap().to_string();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "internal_error");
        assert_eq!(body["service"]["request_id"], id.as_str());
        assert!(
            !body.to_string().contains("handler bug"),
            "the panic text stays in the log"
        );
        let again = app
            .oneshot(Request::get("/ok").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(again.status(), StatusCode::OK, "the server keeps serving");
    }
}
