//! The gateway's wiring, in one place: [`Gateway::start`] (`start.rs`)
//! builds each concern's state once, and [`AppState`] hands every handler only the state
//! of its own concern through axum's `FromRef`: the data plane
//! ([`DataPlane`]), auth ([`AuthState`], all the `Caller` extractor needs),
//! the control plane ([`ControlPlane`]), packages ([`Packages`]) and tool
//! servers and skills ([`Components`]), hosted actors ([`Actors`]), and the
//! browser-origin rule ([`Origins`]). [`Gateway::router`] merges every
//! concern's routes. A concern
//! that acts on another goes through the other's API (an install rebuilds the
//! routes through `RouteTable::rebuild`; the control plane reads the ledger
//! through `tollgate_ledger`'s views), never through a shared struct's fields.

use std::sync::Arc;

mod start;

use axum::extract::FromRef;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::config::Config;
use tollgate_billing::Billing;
use tollgate_control::ControlPlane;
use tollgate_core::db::Database;
use tollgate_gateway::DataPlane;
use tollgate_hosted_actors::Actors;
use tollgate_identity::auth::AuthState;
use tollgate_ledger::Ledger;
use tollgate_metering::Metering;
use tollgate_packages::Packages;
use tollgate_tools::Components;
use tollgate_web::server::Origins;

/// The router's state: one handle per concern.
#[derive(Clone)]
pub struct AppState {
    data: Arc<DataPlane>,
    auth: Arc<AuthState>,
    control: Arc<ControlPlane>,
    packages: Arc<Packages>,
    components: Arc<Components>,
    actors: Arc<Actors>,
    billing: Arc<Billing>,
    origins: Arc<Origins>,
    scim: Arc<tollgate_scim::Provisioning>,
    batches: Arc<tollgate_batches::Batches>,
}

impl FromRef<AppState> for Arc<tollgate_batches::Batches> {
    fn from_ref(state: &AppState) -> Self {
        state.batches.clone()
    }
}

impl FromRef<AppState> for Arc<tollgate_scim::Provisioning> {
    fn from_ref(state: &AppState) -> Self {
        state.scim.clone()
    }
}

impl FromRef<AppState> for Arc<Origins> {
    fn from_ref(state: &AppState) -> Self {
        state.origins.clone()
    }
}

impl FromRef<AppState> for Arc<Billing> {
    fn from_ref(state: &AppState) -> Self {
        state.billing.clone()
    }
}

impl FromRef<AppState> for Arc<Actors> {
    fn from_ref(state: &AppState) -> Self {
        state.actors.clone()
    }
}

impl FromRef<AppState> for Arc<Components> {
    fn from_ref(state: &AppState) -> Self {
        state.components.clone()
    }
}

impl FromRef<AppState> for Arc<DataPlane> {
    fn from_ref(state: &AppState) -> Self {
        state.data.clone()
    }
}

impl FromRef<AppState> for Arc<AuthState> {
    fn from_ref(state: &AppState) -> Self {
        state.auth.clone()
    }
}

impl FromRef<AppState> for Arc<ControlPlane> {
    fn from_ref(state: &AppState) -> Self {
        state.control.clone()
    }
}

impl FromRef<AppState> for Arc<Packages> {
    fn from_ref(state: &AppState) -> Self {
        state.packages.clone()
    }
}

/// A started gateway: the handler state plus what serving and reloading need.
pub struct Gateway {
    pub(crate) state: AppState,
    pub(crate) config: Config,
    pub(crate) database: Database,
    /// `None` when metering (or the ledger it rides on) is off.
    pub(crate) metering: Option<Metering>,
    /// The ledger's writer (also the request log's when the wallet is off):
    /// its grants go back, and its last rows commit, at shutdown.
    pub(crate) ledger: Option<Ledger>,
    /// Plans; unused slices of the month's requests go back at shutdown.
    pub(crate) billing: Arc<Billing>,
    /// Which requests are taken on (load shedding, the drain).
    pub(crate) admission: Arc<tollgate_web::server::Admission>,
    pub(crate) readiness: Arc<tollgate_web::server::Readiness>,
}

/// Serves `gateway` until `shutdown` resolves and its requests have drained,
/// then gives back what it holds for others: wallet grants, unused slices of
/// the month's requests, metering's claims. `ready` gets the bound address.
pub async fn serve_then(
    gateway: Arc<Gateway>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(std::net::SocketAddr),
) -> anyhow::Result<()> {
    tollgate_web::server::serve(
        &gateway.config.listen,
        gateway.router(),
        &gateway.config.server,
        gateway.config.control_plane.trusted_proxies.clone(),
        gateway.lifecycle(),
        shutdown,
        ready,
    )
    .await?;
    if let Some(ledger) = &gateway.ledger {
        ledger.release_grants().await;
    }
    gateway.billing.release_slices().await;
    if let Some(metering) = &gateway.metering {
        metering.release(&gateway.database).await;
    }
    Ok(())
}

impl Gateway {
    /// Every concern's routes inside the layers every request passes.
    pub fn router(&self) -> axum::Router {
        tollgate_web::server::router(
            self.routes(),
            self.state.clone(),
            self.config.server.max_body_bytes,
            &self.lifecycle(),
        )
    }

    fn lifecycle(&self) -> tollgate_web::server::Lifecycle {
        tollgate_web::server::Lifecycle {
            admission: self.admission.clone(),
            readiness: self.readiness.clone(),
            // The warmer's jobs queued while answering (a replacement
            // instance, a used store to drop) are done once the answer is out.
            after_response: Some({
                let warmer = self.state.components.installs().host().warmer().clone();
                let in_flight = self.admission.in_flight();
                Arc::new(move || warmer.after_response(in_flight.load(std::sync::atomic::Ordering::Relaxed) > 0))
            }),
        }
    }

    fn routes(&self) -> axum::Router<AppState> {
        axum::Router::new()
            .route(tollgate_metering::SCHEMA_PATH, get(usage_schema))
            .route(tollgate_metering::BUDGET_SCHEMA_PATH, get(budget_schema))
            .route(tollgate_metering::AUDIT_SCHEMA_PATH, get(audit_schema))
            .merge(tollgate_gateway::routes())
            .merge(tollgate_control::routes(&self.config.control_plane))
            .merge(tollgate_packages::api::routes())
            .merge(tollgate_tools::routes())
            .merge(tollgate_hosted_actors::http::routes())
            .merge(tollgate_identity::auth::signin::routes())
            .merge(crate::console::routes())
            .merge(tollgate_billing::payments::http::routes())
            .merge(tollgate_scim::routes())
            .merge(tollgate_batches::routes())
    }

    /// Rebuilds the catalog from `config` (providers, prices, keys) with the
    /// installs applied, and freezes its prices as a pricing snapshot.
    /// Requests already running keep theirs.
    pub async fn reload(&self, config: &Config) -> anyhow::Result<i64> {
        self.state
            .packages
            .reload(&config.providers, &config.registry.operator_workspaces)
            .await
    }
}

/// The JSON Schema that usage events name as their `dataschema`.
async fn usage_schema() -> Response {
    (
        [(header::CONTENT_TYPE, "application/schema+json")],
        tollgate_metering::SCHEMA,
    )
        .into_response()
}

/// The JSON Schema that audit events name as their `dataschema`.
async fn audit_schema() -> Response {
    (
        [(header::CONTENT_TYPE, "application/schema+json")],
        tollgate_metering::AUDIT_SCHEMA,
    )
        .into_response()
}

/// The JSON Schema that budget threshold events name as their `dataschema`.
async fn budget_schema() -> Response {
    (
        [(header::CONTENT_TYPE, "application/schema+json")],
        tollgate_metering::BUDGET_SCHEMA,
    )
        .into_response()
}
