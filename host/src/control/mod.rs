//! The control plane: A2A v1.0 over JSON-RPC 2.0 (`POST /a2a`, Agent Card at
//! `/.well-known/agent-card.json`). `registry.rs` is the single list of
//! operations; `workspaces.rs`, `members.rs` and `billing.rs` hold their
//! handlers; `permissions.rs` is the role table both planes use; `rpc.rs`,
//! `tasks.rs` and `card.rs` are the A2A surface. See docs/control-plane.md.

pub mod billing;
pub mod card;
pub mod conformance;
pub mod error;
pub mod members;
pub mod permissions;
pub mod registry;
pub mod rpc;
pub mod tasks;
pub mod workspaces;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use crate::server::Gateway;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlPlaneConfig {
    /// Base URL announced in the Agent Card (e.g. `https://gw.example.com`);
    /// defaults to `http://<Host header>`.
    pub public_url: Option<String>,
    /// Sign-ups accepted per minute, across all callers.
    pub signup_per_minute: u32,
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
            signup_per_minute: 10,
            signup_credit_usd: "0".into(),
            max_body_bytes: 256 << 10,
            conformance_mode: false,
        }
    }
}

/// Control-plane state held by the gateway: the sign-up rate limit.
pub struct ControlState {
    config: ControlPlaneConfig,
    signups: Mutex<(Instant, u32)>,
}

impl ControlState {
    pub fn new(config: &ControlPlaneConfig) -> Self {
        Self {
            config: config.clone(),
            signups: Mutex::new((Instant::now(), 0)),
        }
    }

    /// A fixed one-minute window shared by all callers: sign-up is the only
    /// unauthenticated write, so it gets a global budget.
    pub fn signup_permitted(&self) -> bool {
        let mut window = self.signups.lock().expect("signup limiter poisoned");
        if window.0.elapsed() >= Duration::from_secs(60) {
            *window = (Instant::now(), 0);
        }
        if window.1 >= self.config.signup_per_minute {
            return false;
        }
        window.1 += 1;
        true
    }

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

pub fn routes(config: &ControlPlaneConfig) -> Router<Arc<Gateway>> {
    Router::new()
        .route("/.well-known/agent-card.json", get(agent_card))
        .route(
            "/a2a",
            post(rpc::endpoint).layer(DefaultBodyLimit::max(config.max_body_bytes)),
        )
}

async fn agent_card(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> axum::Json<serde_json::Value> {
    axum::Json(card::agent_card(&gateway.control.public_url(Some(&headers)), false))
}
