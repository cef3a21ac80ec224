//! The gateway's own origin, and which browser origins may call the APIs a
//! browser can reach (`/v1/mcp`, the A2A endpoints): `control_plane.public_url`
//! and `control_plane.allowed_origins`. A request from any other `Origin` is
//! refused (MCP 2025-11-25 asks for 403, against DNS rebinding); each surface
//! answers that in its own protocol.
//!
//! A gateway that listens on loopback only and announces no `public_url` is a
//! local server: a page whose DNS name was rebound to 127.0.0.1 would reach it
//! with its own name as both `Host` and `Origin`, which a same-origin check
//! alone lets through. Such a gateway also refuses a `Host` that is not a
//! loopback name (`localhost`, `127.0.0.1`, `[::1]`).

use axum::http::HeaderMap;

pub struct Origins {
    /// Base URL the gateway announces (e.g. `https://gw.example.com`);
    /// `None`: `http://<Host header>`.
    public_url: Option<String>,
    /// Browser origins allowed besides the gateway's own.
    allowed: Vec<String>,
    /// Listening on loopback only with no `public_url`: `Host` must name
    /// loopback.
    local_only: bool,
}

impl Origins {
    /// `listen` is the address the gateway listens on (`host:port`).
    pub fn new(public_url: Option<String>, allowed: Vec<String>, listen: &str) -> Self {
        let listen_host = listen.rsplit_once(':').map_or(listen, |(host, _)| host);
        let local_only = public_url.is_none() && is_loopback_name(listen_host);
        Self {
            public_url,
            allowed,
            local_only,
        }
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
        if self.local_only
            && let Some(host) = headers.get(axum::http::header::HOST)
            && !host.to_str().is_ok_and(|host| is_loopback_name(strip_port(host)))
        {
            let origin = headers.get(axum::http::header::ORIGIN).unwrap_or(host);
            return Some(String::from_utf8_lossy(origin.as_bytes()).into_owned());
        }
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

/// `localhost`, or a loopback IP (IPv6 with or without brackets).
fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A `Host` header's name without its port (`[::1]:8080` → `[::1]`).
fn strip_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((name, port))
            if port.bytes().all(|b| b.is_ascii_digit()) && (!name.contains(':') || name.ends_with(']')) =>
        {
            name
        }
        _ => host,
    }
}

/// A public URL reduced to its origin (`scheme://host[:port]`).
fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(url) => url.origin().ascii_serialization(),
        Err(_) => url.trim_end_matches('/').to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(axum::http::header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(origin) = origin {
            headers.insert(axum::http::header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        headers
    }

    #[test]
    fn a_loopback_gateway_refuses_a_rebound_host_even_from_its_own_origin() {
        let origins = Origins::new(None, vec![], "127.0.0.1:8080");
        let rebound = headers("evil.example.com:8080", Some("http://evil.example.com:8080"));
        assert_eq!(
            origins.foreign_origin(&rebound).as_deref(),
            Some("http://evil.example.com:8080")
        );
        // Without an Origin (a script outside a browser) the Host still counts.
        assert!(origins.foreign_origin(&headers("evil.example.com", None)).is_some());
        for local in ["localhost:8080", "127.0.0.1:8080", "[::1]:8080", "localhost"] {
            let same = headers(local, Some(&format!("http://{local}")));
            assert_eq!(origins.foreign_origin(&same), None, "{local}");
            assert_eq!(origins.foreign_origin(&headers(local, None)), None, "{local}");
        }
        // Another local origin is still another origin.
        let other = headers("localhost:8080", Some("http://localhost:3000"));
        assert!(origins.foreign_origin(&other).is_some());
    }

    #[test]
    fn a_public_or_announced_gateway_checks_the_origin_only() {
        let public = Origins::new(None, vec![], "0.0.0.0:8080");
        assert_eq!(public.foreign_origin(&headers("gw.example.com", None)), None);
        let same = headers("gw.example.com", Some("https://gw.example.com"));
        assert_eq!(public.foreign_origin(&same), None);
        let announced = Origins::new(Some("https://gw.example.com".into()), vec![], "127.0.0.1:8080");
        assert_eq!(announced.foreign_origin(&same), None);
        let foreign = headers("gw.example.com", Some("https://evil.example.com"));
        assert!(announced.foreign_origin(&foreign).is_some());
    }
}
