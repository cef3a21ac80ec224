//! The control plane: A2A v1.0 over JSON-RPC 2.0 (`POST /a2a`, Agent Card at
//! `/.well-known/agent-card.json`), and each hosted actor deployment as an
//! A2A agent of its own (`actor_agents.rs`). `registry.rs` is the single
//! list of operations; `ops/` holds their handlers, one file per category;
//! `rpc.rs`, `protojson.rs`, `tasks.rs` and `card.rs` are the A2A surface.
//! Roles and permissions live with auth (`tollgate_identity::auth::permissions`).
//!
//! Control depends on the concerns (accounts, billing, the ledger's views,
//! packages, components, actors) and calls their APIs; none of them depends
//! on control. See docs/control-plane.md.

#![forbid(unsafe_code)]

pub mod actor_agents;
pub mod audit;
pub mod card;
mod config;
#[cfg(feature = "a2a-conformance")]
pub mod conformance;
pub mod error;
pub mod ops;
pub mod protojson;
pub mod registry;
pub mod rpc;
pub mod tasks;

pub use config::ControlPlaneConfig;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};

use tollgate_billing::Billing;
use tollgate_core::db::Database;
use tollgate_hosted_actors::Actors;
use tollgate_identity::accounts::Accounts;
use tollgate_identity::auth::AuthState;
use tollgate_packages::Packages;
use tollgate_web::rate_limit::IpRateLimiter;
use tollgate_web::server::Origins;

/// The APIs of the concerns the operations act on. An operation takes only
/// the ones it uses (`registry::Uses`).
pub struct Concerns {
    pub accounts: Accounts,
    /// Plans, spend controls, payments.
    pub billing: Arc<Billing>,
    /// The ledger's read-only views: wallets and the request log.
    pub ledger: tollgate_ledger::Views,
    pub packages: Arc<Packages>,
    /// Tool servers, skills, guardrails and prompt templates installed into workspaces.
    pub components: Arc<tollgate_tools::Installs>,
    /// Hosted actors, their deployments and runs.
    pub actors: Arc<Actors>,
    /// Where every change is recorded (`audit.rs`).
    pub audit: tollgate_audit::AuditLog,
    /// SCIM provisioning: the workspaces' tokens and group mappings.
    pub scim: Arc<tollgate_scim::Provisioning>,
}

/// Sign-up, the only unauthenticated write: a budget per client, and the
/// opening credit of a new workspace's wallet.
pub struct Signups {
    limiter: IpRateLimiter,
    /// `control_plane.signup_credit_usd`.
    credit_usd: String,
}

impl Signups {
    /// Spends one sign-up from `client`'s budget. Each client has its own
    /// budget, so one client using its up blocks nobody else. `Err` holds
    /// how long to wait.
    pub fn permitted(&self, client: Option<IpAddr>) -> Result<(), Duration> {
        self.limiter.check(client)
    }

    /// The opening credit, exact USD.
    pub fn credit_usd(&self) -> &str {
        &self.credit_usd
    }
}

/// Gateway-wide limits some operations apply.
pub struct Limits {
    /// `control_plane.max_namespaces_per_workspace`; 0: no limit.
    pub namespaces_per_workspace: u32,
    /// `auth.key_requests_per_minute`: a key's own limit may only tighten it.
    pub key_requests_per_minute: u32,
}

/// The control plane's state: its settings, the browser-origin rule, sign-up,
/// the concerns' APIs and its own task store. Its handlers take this; an
/// operation takes only the parts it names.
pub struct ControlPlane {
    config: ControlPlaneConfig,
    origins: Arc<Origins>,
    signups: Signups,
    limits: Limits,
    apis: Concerns,
    /// The task store's database (`tasks.rs`, the control plane's own
    /// table); no operation sees it.
    tasks: Database,
}

impl ControlPlane {
    /// Refuses a configuration this build cannot honour.
    pub fn check(config: &ControlPlaneConfig) -> anyhow::Result<()> {
        anyhow::ensure!(
            !config.conformance_mode || cfg!(feature = "a2a-conformance"),
            "control_plane.conformance_mode needs a build with the A2A test kit's scripts: \
             cargo build -p tollgate --features a2a-conformance (never in production)"
        );
        Ok(())
    }

    pub fn new(
        config: &ControlPlaneConfig,
        origins: Arc<Origins>,
        apis: Concerns,
        tasks: Database,
        key_requests_per_minute: u32,
    ) -> Self {
        Self {
            config: config.clone(),
            origins,
            signups: Signups {
                limiter: IpRateLimiter::per_minute(config.signup_per_minute),
                credit_usd: config.signup_credit_usd.clone(),
            },
            limits: Limits {
                namespaces_per_workspace: config.max_namespaces_per_workspace,
                key_requests_per_minute,
            },
            apis,
            tasks,
        }
    }

    #[cfg_attr(not(feature = "a2a-conformance"), allow(dead_code))]
    pub fn conformance_mode(&self) -> bool {
        self.config.conformance_mode
    }

    /// The gateway's base URL (`control_plane.public_url`, else the Host
    /// header's).
    pub fn public_url(&self, headers: Option<&HeaderMap>) -> String {
        self.origins.public_url(headers)
    }

    /// The request's `Origin` when a browser sent one that may not call the
    /// A2A endpoints (see [`Origins::foreign_origin`]).
    pub fn foreign_origin(&self, headers: &HeaderMap) -> Option<String> {
        self.origins.foreign_origin(headers)
    }
}

pub fn routes<S>(config: &ControlPlaneConfig) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<ControlPlane>: FromRef<S>,
    Arc<Actors>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    let endpoint = post(rpc::endpoint).layer(DefaultBodyLimit::max(config.max_body_bytes));
    Router::new()
        .route("/.well-known/agent-card.json", get(agent_card))
        // Clients that treat the card's interface URL as a base URL (the A2A
        // TCK among them, via httpx) post to `/a2a/`; both spellings are the
        // same endpoint.
        .route("/a2a", endpoint.clone())
        .route("/a2a/", endpoint)
        .merge(actor_agents::routes())
}

async fn agent_card(State(control): State<Arc<ControlPlane>>, headers: HeaderMap) -> axum::Json<serde_json::Value> {
    axum::Json(card::agent_card(&control.public_url(Some(&headers)), false))
}
