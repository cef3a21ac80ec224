//! The gateway's own origin, and which browser origins may call the APIs a
//! browser can reach (`/v1/mcp`, the A2A endpoints): `control_plane.public_url`
//! and `control_plane.allowed_origins`. A request from any other `Origin` is
//! refused (MCP 2025-11-25 asks for 403, against DNS rebinding); each surface
//! answers that in its own protocol.

use axum::http::HeaderMap;

pub struct Origins {
    /// Base URL the gateway announces (e.g. `https://gw.example.com`);
    /// `None`: `http://<Host header>`.
    public_url: Option<String>,
    /// Browser origins allowed besides the gateway's own.
    allowed: Vec<String>,
}

impl Origins {
    pub fn new(public_url: Option<String>, allowed: Vec<String>) -> Self {
        Self { public_url, allowed }
    }

    /// The gateway's base URL: `public_url` when configured, else
    /// `http://<Host header>`.
    pub fn public_url(&self, headers: Option<&HeaderMap>) -> String {
        if let Some(url) = &self.public_url {
            return url.trim_end_matches('/').to_string();
        }
        let host = headers
            .and_then(|h| h.get(axum::http::header::HOST))
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        format!("http://{host}")
    }

    /// The request's `Origin` when a browser sent one that may not call
    /// these APIs. No `Origin` (a non-browser client) passes.
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
            || (self.public_url.is_none() && same(&own_https))
            || self.allowed.iter().any(|allowed| same(allowed));
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
