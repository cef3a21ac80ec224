//! The control plane: A2A v1.0 over JSON-RPC 2.0 (`POST /a2a`, Agent Card at
//! `/.well-known/agent-card.json`). `registry.rs` is the single list of
//! operations; `workspaces.rs`, `members.rs` and `billing.rs` hold their
//! handlers; `rpc.rs`, `protojson.rs`, `tasks.rs` and `card.rs` are the A2A
//! surface. Roles and permissions live with auth (`crate::auth::permissions`).
//! See docs/control-plane.md.

pub mod billing;
pub mod budgets;
pub mod card;
#[cfg(feature = "a2a-conformance")]
pub mod conformance;
pub mod error;
pub mod members;
pub mod payments;
pub mod protojson;
pub mod registry;
pub mod rpc;
pub use rpc::{unsupported_content_type, version as a2a_version};
pub mod tasks;
pub mod workspaces;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use crate::accounts::Accounts;
use crate::packages::Packages;
use tollgate_core::db::Database;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlPlaneConfig {
    /// Base URL announced in the Agent Card (e.g. `https://gw.example.com`);
    /// defaults to `http://<Host header>`.
    pub public_url: Option<String>,
    /// Browser origins (`scheme://host[:port]`) allowed to call `/v1/mcp` and
    /// the A2A endpoints besides the gateway's own (`public_url`'s, or the
    /// Host header's without it). A request with any other `Origin` gets 403.
    pub allowed_origins: Vec<String>,
    /// Sign-ups accepted per minute from one client address (IPv6: one /64),
    /// in bursts of as many; 0 closes sign-up. Kept per gateway process.
    pub signup_per_minute: u32,
    /// Proxies whose `X-Forwarded-For` names the client (addresses or CIDR
    /// blocks). Empty: the socket peer is the client, and the header is ignored.
    pub trusted_proxies: Vec<crate::rate_limit::TrustedProxy>,
    /// Namespaces one workspace may have; 0: no limit.
    pub max_namespaces_per_workspace: u32,
    /// Opening wallet credit of a signed-up workspace (Free plan), exact USD.
    pub signup_credit_usd: String,
    /// Largest accepted JSON-RPC request body.
    pub max_body_bytes: usize,
    /// Test mode for the official A2A compatibility kit: unauthenticated callers
    /// act as a sandbox principal and non-op messages follow the kit's scripts.
    /// Never enable it in production.
    pub conformance_mode: bool,
}

impl Default for ControlPlaneConfig {
    fn default() -> Self {
        Self {
            public_url: None,
            allowed_origins: Vec::new(),
            signup_per_minute: 10,
            trusted_proxies: Vec::new(),
            max_namespaces_per_workspace: 20,
            signup_credit_usd: "0".into(),
            max_body_bytes: 1280 << 10,
            conformance_mode: false,
        }
    }
}

/// The control plane's state: its settings, the sign-up rate limit, and the
/// APIs of the concerns its operations act on (accounts, packages, the
/// ledger's views). Its handlers take this and nothing else.
pub struct ControlPlane {
    config: ControlPlaneConfig,
    signups: crate::rate_limit::IpRateLimiter,
    accounts: Accounts,
    /// Plans: what a workspace's plan allows, its monthly usage.
    billing: Arc<crate::billing::Billing>,
    packages: Arc<Packages>,
    /// Tool servers and skills installed into workspaces.
    components: Arc<crate::components::Installs>,
    /// Hosted actors, their deployments and runs.
    actors: Arc<crate::actors::Actors>,
    /// The task store's and the ledger views' database.
    database: Database,
    /// `limits.key_requests_per_minute`: a key's own limit may only tighten it.
    key_requests_per_minute: u32,
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

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: &ControlPlaneConfig,
        accounts: Accounts,
        billing: Arc<crate::billing::Billing>,
        packages: Arc<Packages>,
        components: Arc<crate::components::Installs>,
        actors: Arc<crate::actors::Actors>,
        database: Database,
        key_requests_per_minute: u32,
    ) -> Self {
        Self {
            config: config.clone(),
            signups: crate::rate_limit::IpRateLimiter::per_minute(config.signup_per_minute),
            accounts,
            billing,
            packages,
            components,
            actors,
            database,
            key_requests_per_minute,
        }
    }

    /// Spends one sign-up from `client`'s budget: sign-up is the only
    /// unauthenticated write. Each client has its own budget, so one client
    /// using its up blocks nobody else. `Err` holds how long to wait.
    pub fn signup_permitted(&self, client: Option<IpAddr>) -> Result<(), Duration> {
        self.signups.check(client)
    }

    #[cfg_attr(not(feature = "a2a-conformance"), allow(dead_code))]
    pub fn conformance_mode(&self) -> bool {
        self.config.conformance_mode
    }

    pub fn public_url(&self, headers: Option<&HeaderMap>) -> String {
        if let Some(url) = &self.config.public_url {
            return url.trim_end_matches('/').to_string();
        }
        let host = headers
            .and_then(|h| h.get(axum::http::header::HOST))
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        format!("http://{host}")
    }
}

impl ControlPlane {
    /// The request's `Origin` when a browser sent one that may not call
    /// `/v1/mcp` or the A2A endpoints (MCP 2025-11-25 asks servers to refuse
    /// such requests with 403, against DNS rebinding). No `Origin` (a
    /// non-browser client) passes.
    pub fn foreign_origin(&self, headers: &HeaderMap) -> Option<String> {
        let origin = headers.get(axum::http::header::ORIGIN)?;
        let Ok(origin) = origin.to_str() else {
            return Some(String::from_utf8_lossy(origin.as_bytes()).into_owned());
        };
        let origin = origin.trim_end_matches('/');
        let own = origin_of(&self.public_url(Some(headers)));
        let same = |candidate: &str| origin.eq_ignore_ascii_case(candidate.trim_end_matches('/'));
        // Without public_url the gateway's own origin is its Host header,
        // over either scheme (TLS may end at a proxy in front of it).
        let own_https = own.replacen("http://", "https://", 1);
        let allowed = same(&own)
            || (self.config.public_url.is_none() && same(&own_https))
            || self.config.allowed_origins.iter().any(|allowed| same(allowed));
        (!allowed).then(|| origin.to_string())
    }
}

/// A public URL reduced to its origin (`scheme://host[:port]`).
fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(url) => url.origin().ascii_serialization(),
        Err(_) => url.trim_end_matches('/').to_string(),
    }
}

pub fn routes(config: &ControlPlaneConfig) -> Router<crate::app::AppState> {
    let endpoint = post(rpc::endpoint).layer(DefaultBodyLimit::max(config.max_body_bytes));
    Router::new()
        .route("/.well-known/agent-card.json", get(agent_card))
        // Clients that treat the card's interface URL as a base URL (the A2A
        // TCK among them, via httpx) post to `/a2a/`; both spellings are the
        // same endpoint.
        .route("/a2a", endpoint.clone())
        .route("/a2a/", endpoint)
}

async fn agent_card(State(control): State<Arc<ControlPlane>>, headers: HeaderMap) -> axum::Json<serde_json::Value> {
    axum::Json(card::agent_card(&control.public_url(Some(&headers)), false))
}
