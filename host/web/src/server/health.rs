//! Health endpoints for orchestrators and load balancers, unauthenticated and
//! never shed:
//!
//! - `GET /healthz`, liveness: the process answers (`ok`).
//! - `GET /readyz`, readiness: 200 while the database answers and every
//!   adapter the live routes name is loaded; 503 in the documented error shape
//!   otherwise, and from the moment a shutdown begins (SIGTERM), so that load
//!   balancers stop sending traffic before the drain.
//!
//! The gateway listens only once its adapters and installs have loaded, so a
//! process that answers has loaded them; the check confirms the live routes
//! still resolve. The checks' result is reused for a second, so a flood of
//! probes costs the database one query a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::server::RequestId;
use tollgate_core::db::Database;

pub const HEALTHZ: &str = "/healthz";
pub const READYZ: &str = "/readyz";

const CHECK_REUSE: Duration = Duration::from_secs(1);
const DATABASE_TIMEOUT: Duration = Duration::from_secs(2);

pub fn is_health_check(path: &str) -> bool {
    path == HEALTHZ || path == READYZ
}

/// The adapters the live routes name that are not loaded.
pub type UnloadedAdapters = Box<dyn Fn() -> Vec<String> + Send + Sync>;

pub struct Readiness {
    stopping: AtomicBool,
    database: Database,
    unloaded_adapters: UnloadedAdapters,
    last: tokio::sync::Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Readiness {
    pub fn new(database: Database, unloaded_adapters: UnloadedAdapters) -> Self {
        Self {
            stopping: AtomicBool::new(false),
            database,
            unloaded_adapters,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// A shutdown has begun: not ready from now on.
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// The checks, or their result from less than a second ago. Concurrent
    /// probes wait for the one check in progress.
    async fn check(&self) -> Result<(), String> {
        let mut last = self.last.lock().await;
        if let Some((at, result)) = &*last
            && at.elapsed() < CHECK_REUSE
        {
            return result.clone();
        }
        let result = self.run_checks().await;
        *last = Some((Instant::now(), result.clone()));
        result
    }

    async fn run_checks(&self) -> Result<(), String> {
        match tokio::time::timeout(DATABASE_TIMEOUT, self.database.ping()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("the database is unreachable: {e}")),
            Err(_) => {
                return Err(format!(
                    "the database did not answer within {} s",
                    DATABASE_TIMEOUT.as_secs()
                ));
            }
        }
        let unloaded = (self.unloaded_adapters)();
        if !unloaded.is_empty() {
            return Err(format!("adapters not loaded: {}", unloaded.join(", ")));
        }
        Ok(())
    }
}

pub async fn healthz() -> &'static str {
    "ok"
}

pub async fn readyz(readiness: Arc<Readiness>, request_id: RequestId) -> Response {
    let verdict = match readiness.stopping() {
        true => Err("the gateway is shutting down".to_string()),
        false => readiness.check().await,
    };
    match verdict {
        Ok(()) => axum::Json(json!({"status": "ready"})).into_response(),
        Err(why) => {
            let mut error = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "not_ready",
                format!("Not ready: {why}."),
            )
            .with_request_id(&request_id.0);
            // Probes repeat every few seconds; the log says it once elsewhere.
            error.quiet = true;
            error.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn readiness(unloaded: &'static [&'static str]) -> (tempfile::TempDir, Arc<Readiness>) {
        let dir = tempfile::tempdir().unwrap();
        let url = tollgate_core::db::sqlite_url(&dir.path().join("t.db"));
        let database = Database::open(&url, Default::default()).await.unwrap();
        let unloaded = Box::new(|| unloaded.iter().map(|name| name.to_string()).collect());
        (dir, Arc::new(Readiness::new(database, unloaded)))
    }

    async fn status(readiness: &Arc<Readiness>) -> (StatusCode, serde_json::Value) {
        let response = readyz(readiness.clone(), RequestId::new()).await;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn ready_until_the_database_goes_away_or_a_shutdown_begins() {
        let (_dir, readiness) = readiness(&[]).await;
        assert_eq!(status(&readiness).await.0, StatusCode::OK);

        readiness.database.pool.close().await;
        // The answer from a moment ago is reused for a second.
        assert_eq!(status(&readiness).await.0, StatusCode::OK);
        *readiness.last.lock().await = None;
        let (code, body) = status(&readiness).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"]["code"], "not_ready");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("database"),
            "{body}"
        );

        readiness.stop();
        let (code, body) = status(&readiness).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body["error"]["message"].as_str().unwrap().contains("shutting down"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn not_ready_while_a_route_names_an_adapter_that_is_not_loaded() {
        let (_dir, readiness) = readiness(&["acme/echo@1.0.0"]).await;
        let (code, body) = status(&readiness).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body["error"]["message"].as_str().unwrap().contains("acme/echo@1.0.0"),
            "{body}"
        );
    }
}
