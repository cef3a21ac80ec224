//! The OpenAI-compatible data plane: `/v1/chat/completions` and `/v1/models`,
//! and the other client protocols on the same pipeline (`ingress`:
//! `/v1/messages`, `/v1/responses`). Every model call, from a client or from
//! inside the gateway (skills, hosted actors), goes through one typed door,
//! [`pipeline`].
//! Its handlers take [`DataPlane`], the state of this concern only: the route
//! table, adapters, upstream client, breakers, the ledger, plans and the limits.

#![forbid(unsafe_code)]

mod adapter_errors;
mod attempts;
mod billing;
pub mod cache;
mod chat;
mod chunk;
mod endpoints;
mod envelope;
mod framing;
#[doc(hidden)]
pub mod fuzzing;
pub mod guards;
mod http;
mod ingress;
mod models;
mod native;
mod operations;
pub mod pipeline;
pub mod probe;
mod provenance;
mod routing;
pub mod sigv4;
mod stages;
mod stream;
mod table;
pub mod upstream;

use std::sync::Arc;

use axum::Router;
use axum::extract::FromRef;
use axum::routing::{get, post};

use tollgate_identity::auth::AuthState;
use tollgate_ledger::Ledger;
use tollgate_plugin_host::Adapters;
use tollgate_routing::affinity::Affinity;
use tollgate_routing::catalog::Catalog;
use tollgate_routing::groups::RoutingConfig;
use tollgate_routing::health::{BreakerConfig, Health};
use tollgate_routing::traffic::Traffic;

pub use billing::{CeilingHold, CostCeiling};
pub use framing::{FrameError, sse_events};
pub use http::ModelDelegate;
pub use operations::form::parse as parse_form;
pub use table::RouteTable;
pub use tollgate_plugin_host::Event as SseEvent;
use upstream::Upstream;

/// The routing table requests read: the catalog and the pricing snapshot its
/// prices were frozen as. Replaced whole on reload; a request keeps the table it
/// started with.
pub struct Routes {
    pub catalog: Catalog,
    pub snapshot_id: i64,
}

/// The data plane's own settings, fixed at start.
pub struct DataLimits {
    /// `server.max_body_bytes`: the largest request body.
    pub max_body_bytes: usize,
    /// `server.max_upload_bytes`: the largest form upload (image edits,
    /// audio to transcribe).
    pub max_upload_bytes: usize,
    /// `upstream.max_body_bytes`: the largest whole upstream answer read.
    pub max_upstream_body_bytes: usize,
    /// `ledger.default_max_output_tokens`: the cap sent when a request sets none.
    pub default_max_output_tokens: u32,
    /// `telemetry.log_prompts`: log request bodies.
    pub log_prompts: bool,
    /// `guardrails.stream_window_chars`: how much of a streamed answer's
    /// text answer guardrails check at a time.
    pub guard_window_chars: usize,
    /// `[cache]`: the response cache.
    pub cache: cache::CacheConfig,
}

/// The ledger as the data plane uses it.
pub struct Books {
    /// Writes every request's log row, whether or not the wallet is on.
    pub request_log: Ledger,
    /// The same writer when requests are reserved and billed; `None` when
    /// `ledger.enabled = false`.
    pub wallet: Option<Ledger>,
}

/// What routing keeps between requests: the breakers, live traffic per
/// route, the operator's groups and where each conversation was served.
pub struct Routing {
    health: Health,
    traffic: Traffic,
    groups: RoutingConfig,
    affinity: Affinity,
}

impl Routing {
    pub fn new(breaker: BreakerConfig, groups: RoutingConfig) -> Self {
        Self {
            health: Health::new(breaker),
            traffic: Traffic::default(),
            affinity: Affinity::new(std::time::Duration::from_secs(groups.affinity_ttl_secs)),
            groups,
        }
    }
}

/// The data plane's handler state.
pub struct DataPlane {
    routes: Arc<RouteTable>,
    adapters: Arc<Adapters>,
    upstream: Upstream,
    health: Health,
    traffic: Traffic,
    groups: RoutingConfig,
    affinity: Affinity,
    /// `None` when `ledger.enabled = false`.
    ledger: Option<Ledger>,
    request_log: Ledger,
    /// Plans: the monthly request limit and the gateway fee.
    billing: Arc<tollgate_billing::Billing>,
    limits: DataLimits,
    /// Concerns serving models of their own on `/v1/chat/completions`
    /// (hosted actors), registered at wiring.
    delegates: std::sync::OnceLock<Vec<http::Delegate>>,
    /// The guardrails, registered at wiring by the concern that installs them.
    guardrails: std::sync::OnceLock<Arc<dyn guards::Guardrails>>,
    cache: cache::ResponseCache,
}

impl DataPlane {
    /// Admits one billable request of `caller` under its workspace's plan
    /// (the monthly request limit); `None` when the ledger is off, where
    /// nothing is limited or billed.
    pub async fn admit(
        &self,
        caller: &tollgate_identity::auth::Principal,
    ) -> Result<Option<tollgate_billing::Admitted>, tollgate_billing::BillingError> {
        match self.ledger.is_some() {
            true => self.billing.admit(&caller.workspace_id, &caller.key_id).await.map(Some),
            false => Ok(None),
        }
    }

    pub fn new(
        routes: Arc<RouteTable>,
        adapters: Arc<Adapters>,
        upstream: Upstream,
        routing: Routing,
        books: Books,
        billing: Arc<tollgate_billing::Billing>,
        limits: DataLimits,
    ) -> Self {
        Self {
            routes,
            adapters,
            upstream,
            health: routing.health,
            traffic: routing.traffic,
            groups: routing.groups,
            affinity: routing.affinity,
            ledger: books.wallet,
            request_log: books.request_log,
            billing,
            cache: cache::ResponseCache::new(limits.cache.clone()),
            limits,
            delegates: std::sync::OnceLock::new(),
            guardrails: std::sync::OnceLock::new(),
        }
    }

    /// The guardrail checks of one request of `caller` on `route` for
    /// `target`, when any guard applies: a concern with requests of its own
    /// (tool calls) runs them as the pipeline does.
    pub fn guard_checks(
        &self,
        caller: &Arc<tollgate_identity::auth::Principal>,
        route: guards::GuardRoute,
        target: &str,
        request_id: &str,
        request: &str,
    ) -> Option<guards::Checks> {
        let guardrails = self.guardrails.get().filter(|g| g.any(caller))?;
        let chosen = guardrails.select(caller, route, target);
        let call = guards::GuardCall {
            caller: caller.clone(),
            request_id: request_id.to_string(),
            route,
            target: target.to_string(),
            request: Arc::from(request),
        };
        (!chosen.is_empty()).then(|| guards::Checks::new(chosen, call))
    }

    /// Registers the guardrails (at wiring, once).
    pub fn guard_with(&self, guardrails: Arc<dyn guards::Guardrails>) {
        if self.guardrails.set(guardrails).is_err() {
            tracing::error!("guardrails were registered twice; the first stay");
        }
    }

    /// The routing table for a new request.
    fn routes(&self) -> Arc<Routes> {
        self.routes.current()
    }

    /// `server.max_upload_bytes`: the largest form upload (the Files API
    /// takes its uploads under the same limit).
    pub fn max_upload_bytes(&self) -> usize {
        self.limits.max_upload_bytes
    }

    /// Holds an operator's fixed `price` for work of `caller` that is not a
    /// model call (a priced tool call) on its wallet, before the work runs;
    /// the work's request-log row posts it, as its fee, with
    /// [`Ledger::settle`] on [`request_log`](Self::request_log). `Ok(None)`
    /// when the price is zero or the wallet is off (nothing is billed then).
    /// A wallet that cannot pay is 402 `insufficient_balance`.
    pub async fn hold_price(
        &self,
        caller: &tollgate_identity::auth::Principal,
        price: tollgate_core::money::Nanos,
    ) -> Result<Option<tollgate_ledger::Hold>, tollgate_web::error::ApiError> {
        use tollgate_web::error::ApiError;
        let Some(wallet) = self.ledger.as_ref().filter(|_| price.0 > 0) else {
            return Ok(None);
        };
        match wallet
            .reserve(&caller.workspace_id, price, self.routes().snapshot_id)
            .await
        {
            Ok(hold) => Ok(Some(hold)),
            Err(tollgate_ledger::ReserveError::Insufficient { needed, available }) => Err(ApiError::new(
                axum::http::StatusCode::PAYMENT_REQUIRED,
                "billing_error",
                "insufficient_balance",
                format!(
                    "Insufficient balance: this call costs {} USD and {} USD is available. Top up the wallet.",
                    needed.usd_decimal(),
                    available.usd_decimal()
                ),
            )),
            Err(tollgate_ledger::ReserveError::Unavailable(reason)) => Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "ledger_unavailable",
                format!("The wallet ledger is unavailable: {reason}"),
            )),
        }
    }

    /// The request log's writer, for other concerns that log requests of
    /// their own (tool calls, skill and actor runs, refusals); there whether
    /// or not the wallet is on.
    pub fn request_log(&self) -> &Ledger {
        &self.request_log
    }
}

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<DataPlane>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    Router::new()
        .route("/v1/chat/completions", post(http::chat_completions))
        .route("/v1/models", get(models::list_models))
        .route("/v1/models/{*id}", get(models::get_model))
        .merge(ingress::routes())
        .merge(endpoints::routes())
}
