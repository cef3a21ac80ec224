//! The HTTP server: shared gateway state, request ids, caller authentication and
//! the router. Accepted sockets get TCP_NODELAY: without it Nagle's algorithm
//! holds small responses for the client's delayed ACK (tens of milliseconds).

use std::sync::{Arc, RwLock};

use anyhow::Context;
use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use futures_util::FutureExt;

use crate::auth::{KeyResolver, Principal};
use crate::config::Config;
use crate::data_plane::{self, Routes, upstream::Upstream};
use crate::error::ApiError;
use tollgate_core::db::Database;
use tollgate_ledger::Ledger;
use tollgate_metering::Metering;
use tollgate_plugin_host::Adapters;
use tollgate_routing::catalog::Catalog;
use tollgate_routing::health::Health;

/// Everything a request handler needs, built once at start.
pub struct Gateway {
    pub config: Config,
    pub database: Database,
    /// `None` when `ledger.enabled = false`.
    pub ledger: Option<Ledger>,
    /// `None` when metering (or the ledger it rides on) is off.
    pub metering: Option<Metering>,
    pub adapters: Adapters,
    pub keys: KeyResolver,
    /// Per-key request rates (`[limits] key_requests_per_minute`).
    pub key_rates: crate::rate_limit::KeyRateLimiter,
    pub upstream: Upstream,
    pub health: Health,
    pub control: crate::control::ControlState,
    /// The package registry (blobs + index) and the adapters installed from it.
    pub registry: tollgate_registry::Registry,
    pub installs: crate::packages::Installs,
    routes: RwLock<Arc<Routes>>,
}

impl Gateway {
    pub async fn start(config: Config) -> anyhow::Result<Arc<Self>> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
        crate::control::ControlState::check(&config.control_plane)?;
        let database = Database::open(&config.database_url(), config.ledger.sqlite_sync).await?;
        let keys = KeyResolver::start(&database, &config.database_url()).await?;
        let files: Vec<(String, &std::path::Path)> = config
            .adapters
            .iter()
            .map(|(name, file)| (name.clone(), file.path.as_path()))
            .collect();
        let adapters = Adapters::load(&config.plugins, &config.cache_dir(), &files)?;
        let registry = crate::packages::open(&config.registry, &config.data_dir, database.pool.clone())?;
        crate::packages::seed_builtins(&registry).await?;
        let installs = crate::packages::Installs::load(
            &database,
            &registry,
            &adapters,
            &config.providers,
            &config.registry.operator_workspaces,
        )
        .await?;
        crate::packages::installs::load_references(&registry, &adapters, &config.providers).await?;
        let routes = build_routes(&database, &adapters, &installs.overlay(None)).await?;
        // Usage events ride on ledger settlements, so metering needs the ledger.
        let metering = match config.ledger.enabled {
            true => Metering::new(&config.metering, &config.data_dir, &config.listen)?,
            false => None,
        };
        if let Some(metering) = &metering {
            metering.start(&database).await?;
            crate::telemetry::watch_outbox_backlog(metering.backlog_gauge());
        }
        let ledger = config.ledger.enabled.then(|| {
            Ledger::start(
                database.clone(),
                &config.ledger,
                tollgate_metering::instance_source(&config.metering),
                metering.as_ref().map(Metering::notifier),
            )
        });
        let upstream = Upstream::new(&config.timeouts)?;
        let poll = std::time::Duration::from_millis(config.registry.install_poll_ms);
        let gateway = Arc::new(Self {
            keys,
            key_rates: crate::rate_limit::KeyRateLimiter::new(config.limits.key_requests_per_minute),
            database,
            ledger,
            metering,
            adapters,
            upstream,
            health: Health::new(config.breaker.clone()),
            control: crate::control::ControlState::new(&config.control_plane),
            registry,
            installs,
            routes: RwLock::new(Arc::new(routes)),
            config,
        });
        crate::packages::installs::follow(&gateway, poll);
        Ok(gateway)
    }

    /// The routing table for a new request.
    pub fn routes(&self) -> Arc<Routes> {
        self.routes.read().expect("routes lock poisoned").clone()
    }

    /// Rebuilds the catalog from `config` (providers, prices, keys) and freezes
    /// its prices as a pricing snapshot. Requests already running keep theirs.
    pub async fn reload(&self, config: &Config) -> anyhow::Result<i64> {
        crate::packages::installs::load_references(&self.registry, &self.adapters, &config.providers).await?;
        self.installs.set_operators(&config.registry.operator_workspaces);
        let providers = self.installs.overlay(Some(&config.providers));
        let routes = build_routes(&self.database, &self.adapters, &providers).await?;
        let snapshot_id = routes.snapshot_id;
        *self.routes.write().expect("routes lock poisoned") = Arc::new(routes);
        Ok(snapshot_id)
    }

    /// Rebuilds the routes from the last configuration with the current
    /// installs applied (after an install). Requests already running keep theirs.
    pub async fn rebuild_routes(&self) -> anyhow::Result<i64> {
        let routes = build_routes(&self.database, &self.adapters, &self.installs.overlay(None)).await?;
        let snapshot_id = routes.snapshot_id;
        *self.routes.write().expect("routes lock poisoned") = Arc::new(routes);
        Ok(snapshot_id)
    }
}

async fn build_routes(
    database: &Database,
    adapters: &Adapters,
    providers: &std::collections::BTreeMap<String, tollgate_routing::ProviderConfig>,
) -> anyhow::Result<Routes> {
    let catalog = Catalog::build(providers, &|name| std::env::var(name).ok())?;
    for name in catalog.adapter_names() {
        anyhow::ensure!(
            adapters.get(name).is_some(),
            "a provider uses adapter '{name}', which is neither built in nor configured under [adapters]"
        );
    }
    let snapshot_id = tollgate_routing::snapshots::register(database, &catalog).await?;
    Ok(Routes { catalog, snapshot_id })
}

pub fn router(gateway: Arc<Gateway>) -> Router {
    let body_limit = gateway.config.limits.max_body_bytes;
    Router::new()
        .merge(data_plane::routes())
        .merge(crate::control::routes(&gateway.config.control_plane))
        .merge(crate::packages::api::routes())
        .route("/healthz", get(|| async { "ok" }))
        .route(tollgate_metering::SCHEMA_PATH, get(usage_schema))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn(assign_request_id))
        .with_state(gateway)
}

/// The JSON Schema that usage events name as their `dataschema`.
async fn usage_schema() -> Response {
    (
        [(header::CONTENT_TYPE, "application/schema+json")],
        tollgate_metering::SCHEMA,
    )
        .into_response()
}

pub async fn serve(
    gateway: Arc<Gateway>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listen = gateway.config.listen.clone();
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr()?;
    tracing::info!("tollgate listening on http://{address}");
    // The banner goes to stdout: stderr carries only log lines (JSON when piped).
    println!("tollgate listening on http://{address}");
    let listener = listener.tap_io(|socket| {
        let _ = socket.set_nodelay(true);
    });
    // The peer address feeds per-client limits (sign-up).
    let app = router(gateway.clone()).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await?;
    if let Some(metering) = &gateway.metering {
        metering.release(&gateway.database).await;
    }
    Ok(())
}

/// The request's id, assigned before anything else runs.
#[derive(Clone, Debug)]
pub struct RequestId(pub Arc<str>);

async fn assign_request_id(mut request: Request, next: Next) -> Response {
    let id = RequestId(Arc::from(format!("req_{}", uuid::Uuid::now_v7().simple())));
    request.extensions_mut().insert(id.clone());
    let span = crate::telemetry::server_span(
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
    span.record("http.response.status_code", i64::from(response.status().as_u16()));
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

/// An authenticated caller within its key's request rate. Extracting it before
/// the body means unauthenticated or rate-limited requests are refused before
/// their body is read.
pub struct Caller(pub Arc<Principal>);

impl FromRequestParts<Arc<Gateway>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, gateway: &Arc<Gateway>) -> Result<Self, Self::Rejection> {
        authenticate(parts, gateway).await
    }
}

/// Resolves the key, checks the role may infer, and counts the request against
/// the key's rate (in memory; no I/O on a cached key).
async fn authenticate(parts: &mut Parts, gateway: &Arc<Gateway>) -> Result<Caller, ApiError> {
    let request_id = RequestId::from_request_parts(parts, gateway)
        .await
        .unwrap_or_else(|e| match e {});
    let reject = |message: &str| ApiError::unauthorized(message).with_request_id(&request_id.0);
    let value = parts
        .headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| reject("Missing API key: send 'Authorization: Bearer tg_live_…'."))?;
    let secret = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or_else(|| reject("The Authorization header must be 'Bearer <API key>'."))?;
    match gateway.keys.resolve(secret).await {
        // The same role table as the control plane: viewers may not call the data plane.
        Ok(Some(principal)) if !principal.role.allows(crate::auth::permissions::Permission::Inference) => {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                "permission_denied",
                format!(
                    "This key's role '{}' may not call the data plane.",
                    principal.role.as_str()
                ),
            )
            .with_request_id(&request_id.0))
        }
        Ok(Some(principal)) => match gateway.key_rates.check(&principal) {
            Ok(()) => Ok(Caller(principal)),
            Err(wait) => Err(rate_limited(&principal, gateway, wait, &request_id)),
        },
        Ok(None) => Err(reject("Invalid API key.")),
        Err(e) => {
            tracing::error!(error = %e, "key lookup failed");
            Err(ApiError::internal("Could not check the API key.").with_request_id(&request_id.0))
        }
    }
}

/// 429 for a key over its request rate, with `Retry-After`.
fn rate_limited(
    principal: &Principal,
    gateway: &Gateway,
    wait: std::time::Duration,
    request_id: &RequestId,
) -> ApiError {
    let per_minute =
        crate::rate_limit::effective_per_minute(gateway.key_rates.default_per_minute(), principal.requests_per_minute)
            .map_or(0, std::num::NonZeroU32::get);
    let secs = crate::rate_limit::retry_after_secs(wait);
    ApiError::key_rate_limited(
        format!("This API key is limited to {per_minute} requests per minute; retry after {secs} s."),
        u32::try_from(secs).unwrap_or(u32::MAX),
    )
    .with_request_id(&request_id.0)
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
