//! `[server]`: how the gateway treats client connections — how long it waits
//! for a request's headers and body and for the next request on an idle
//! connection, how many connections and requests it takes on at once, and how
//! it shuts down (docs/operations.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// A request's headers must arrive within this, counted from the
    /// connection's acceptance or from the request's first byte on a reused
    /// connection. Past it the client gets 408 (when it had sent part of a
    /// request) and the connection is closed.
    pub header_read_timeout_ms: u64,
    /// Longest gap between two chunks of a request body; past it, 408.
    pub body_idle_timeout_ms: u64,
    /// The whole request body, from the end of the headers; past it, 408.
    pub body_timeout_ms: u64,
    /// An open connection waiting for its next request is closed after this.
    pub keep_alive_timeout_ms: u64,
    /// Client connections open at once; further ones get 503 and are closed.
    pub max_connections: usize,
    /// Client connections open at once from one address (IPv6: one /64).
    /// Connections from `control_plane.trusted_proxies` are not counted. 0: no
    /// per-address limit.
    pub max_connections_per_ip: usize,
    /// Requests being served at once, a streamed answer until its end. Further
    /// ones get 503 with `Retry-After` at once instead of queueing. `/healthz`
    /// and `/readyz` are never refused.
    pub max_in_flight: usize,
    /// The `Retry-After` (seconds) sent with a refused request or connection.
    pub shed_retry_after_secs: u32,
    /// After SIGTERM, `/readyz` answers 503 at once, and the gateway keeps
    /// serving for this long (time for a load balancer to notice) before it
    /// drains: then requests on new connections get 503 and the gateway exits
    /// once the requests already running, streams included, have finished.
    pub shutdown_delay_ms: u64,
    /// Largest accepted request body on the data plane and the component
    /// routes; larger ones get 413. Formerly `[limits] max_body_bytes`.
    pub max_body_bytes: usize,
    /// Largest accepted upload (`multipart/form-data`: image edits, audio to
    /// transcribe); larger ones get 413. OpenAI's own limit for audio is 25 MB.
    pub max_upload_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            header_read_timeout_ms: 10_000,
            body_idle_timeout_ms: 30_000,
            body_timeout_ms: 300_000,
            keep_alive_timeout_ms: 60_000,
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            max_in_flight: 1_024,
            shed_retry_after_secs: 1,
            shutdown_delay_ms: 0,
            max_body_bytes: 4 << 20,
            max_upload_bytes: 25 << 20,
        }
    }
}

impl ServerConfig {
    pub fn check(&self) -> anyhow::Result<()> {
        for (key, value) in [
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("body_idle_timeout_ms", self.body_idle_timeout_ms),
            ("body_timeout_ms", self.body_timeout_ms),
            ("keep_alive_timeout_ms", self.keep_alive_timeout_ms),
            ("max_connections", self.max_connections as u64),
            ("max_in_flight", self.max_in_flight as u64),
        ] {
            anyhow::ensure!(value > 0, "server.{key} must be at least 1");
        }
        // A Tokio semaphore holds at most this many permits.
        anyhow::ensure!(
            self.max_connections <= tokio::sync::Semaphore::MAX_PERMITS,
            "server.max_connections must be at most {}",
            tokio::sync::Semaphore::MAX_PERMITS
        );
        Ok(())
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    pub fn keep_alive_timeout(&self) -> Duration {
        Duration::from_millis(self.keep_alive_timeout_ms)
    }

    pub fn body_idle_timeout(&self) -> Duration {
        Duration::from_millis(self.body_idle_timeout_ms)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_timeout_or_cap_is_refused_but_no_per_address_cap_is_allowed() {
        assert!(ServerConfig::default().check().is_ok());
        let off = ServerConfig {
            max_connections_per_ip: 0,
            ..Default::default()
        };
        assert!(off.check().is_ok());
        for broken in [
            ServerConfig {
                header_read_timeout_ms: 0,
                ..Default::default()
            },
            ServerConfig {
                max_in_flight: 0,
                ..Default::default()
            },
            ServerConfig {
                max_connections: usize::MAX,
                ..Default::default()
            },
        ] {
            assert!(broken.check().is_err(), "{broken:?}");
        }
    }
}
