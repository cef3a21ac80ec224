//! Health endpoints for orchestrators and load balancers, unauthenticated and
//! never shed:
//!
//! - `GET /healthz`, liveness: the process answers (`ok`).
//! - `GET /readyz`, readiness: 200 while every adapter the live routes name
//!   is loaded; 503 in the documented error shape otherwise, and from the
//!   moment a shutdown begins (SIGTERM), so that load balancers stop sending
//!   traffic before the drain. The body also shows whether the database
//!   answers and how many answered settlements the ledger's journal holds
//!   for it (`ledger.lag`). A database that does not answer makes the
//!   gateway `degraded`, not unready: it keeps serving keys it has seen from
//!   its journal and wallet grants, and taking every gateway out of the load
//!   balancer at once would turn a database outage into a gateway outage.
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

/// The ledger journal's state, as `/readyz` shows it.
pub type LedgerHealth = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

pub struct Readiness {
    stopping: AtomicBool,
    database: Database,
    unloaded_adapters: UnloadedAdapters,
    ledger: LedgerHealth,
    last: tokio::sync::Mutex<Option<(Instant, Checked)>>,
}

/// What the last check found: unready (why), or ready with the database
/// reachable or not (why not).
type Checked = Result<Result<(), String>, String>;

impl Readiness {
    pub fn new(database: Database, unloaded_adapters: UnloadedAdapters, ledger: LedgerHealth) -> Self {
        Self {
            stopping: AtomicBool::new(false),
            database,
            unloaded_adapters,
            ledger,
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
    async fn check(&self) -> Checked {
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

    async fn run_checks(&self) -> Checked {
        let unloaded = (self.unloaded_adapters)();
        if !unloaded.is_empty() {
            return Err(format!("adapters not loaded: {}", unloaded.join(", ")));
        }
        Ok(
            match tokio::time::timeout(DATABASE_TIMEOUT, self.database.ping()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("unreachable: {e}")),
                Err(_) => Err(format!("did not answer within {} s", DATABASE_TIMEOUT.as_secs())),
            },
        )
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
        Ok(database) => {
            let (status, database) = match database {
                Ok(()) => ("ready", "reachable".to_string()),
                Err(why) => ("degraded", why),
            };
            axum::Json(json!({"status": status, "database": database, "ledger": (readiness.ledger)()})).into_response()
        }
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
        let ledger = Box::new(|| json!({"lag": 3, "database_reachable": true}));
        (dir, Arc::new(Readiness::new(database, unloaded, ledger)))
    }

    async fn status(readiness: &Arc<Readiness>) -> (StatusCode, serde_json::Value) {
        let response = readyz(readiness.clone(), RequestId::new()).await;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn degraded_while_the_database_is_away_and_unready_once_a_shutdown_begins() {
        let (_dir, readiness) = readiness(&[]).await;
        let (code, body) = status(&readiness).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            body,
            json!({"status": "ready", "database": "reachable", "ledger": {"lag": 3, "database_reachable": true}})
        );

        readiness.database.pool.close().await;
        // The answer from a moment ago is reused for a second.
        assert_eq!(status(&readiness).await.1["status"], "ready");
        *readiness.last.lock().await = None;
        let (code, body) = status(&readiness).await;
        assert_eq!(code, StatusCode::OK, "the gateway keeps serving from its journal");
        assert_eq!(body["status"], "degraded");
        assert!(body["database"].as_str().unwrap().starts_with("unreachable"), "{body}");

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
