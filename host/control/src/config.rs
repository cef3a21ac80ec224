//! `[control_plane]`, owned here and read by the binary's configuration.

use serde::{Deserialize, Serialize};

/// `[control_plane]`: the A2A control plane's settings, and the gateway's
/// public URL and browser origins, which serving (`server::Origins`, the
/// trusted proxies) and sign-in read too.
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
    pub trusted_proxies: Vec<tollgate_web::rate_limit::TrustedProxy>,
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
