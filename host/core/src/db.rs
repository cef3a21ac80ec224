//! The database: SQLite in the data directory by default, Postgres when
//! `database_url` is `postgres://…` (several gateways can then share one ledger).
//! Queries are written once with `$N` placeholders, which both backends accept,
//! and run through sqlx's `Any` driver; only the migrations differ per backend.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions, Executor};

use crate::secret::redact_url;

pub type Db = AnyPool;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// When a SQLite commit counts as durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSync {
    /// fsync on every commit: an acknowledged charge survives power loss. Group
    /// commit shares one fsync among all requests in a batch.
    #[default]
    Full,
    /// No fsync on commit (WAL): survives a crash of the gateway, not of the
    /// machine; the last moments of charges can be lost on power loss.
    Normal,
}

/// An open database with its backend, which decides transaction modes.
#[derive(Clone)]
pub struct Database {
    pub pool: Db,
    pub backend: Backend,
    /// SQLite has one write lock per file, and a writer that finds it taken
    /// sleeps in SQLite's busy handler (1, 2, 5, … 25 ms steps) rather than
    /// queueing. The gateway's steady writers (the ledger writer, the metering
    /// dispatchers) take this gate first, so they queue in-process instead.
    write_gate: Arc<tokio::sync::Mutex<()>>,
}

impl Database {
    /// Opens (creating, for SQLite) and migrates the database. `sync` is the
    /// SQLite commit durability; Postgres keeps its own setting.
    pub async fn open(url: &str, sync: SqliteSync) -> anyhow::Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            anyhow::bail!("database_url '{}': expected sqlite:… or postgres://…", redact_url(url));
        };
        let options: AnyConnectOptions = url
            .parse()
            .with_context(|| format!("invalid database_url '{}'", redact_url(url)))?;
        let options = options.log_statements(tracing::log::LevelFilter::Trace);
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        // WAL lets the CLI write while a server reads.
                        let pragmas = match sync {
                            SqliteSync::Full => "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;",
                            SqliteSync::Normal => "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;",
                        };
                        conn.execute(pragmas).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .with_context(|| format!("cannot open database {}", redact_url(url)))?;
        let migrator = match backend {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("./migrations/postgres"),
        };
        migrator.run(&pool).await.context("database migration failed")?;
        Ok(Self {
            pool,
            backend,
            write_gate: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// One round trip to the database, for readiness checks.
    pub async fn ping(&self) -> sqlx::Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map(|_| ())
    }

    /// Waits for this process's turn to write (see `write_gate`); hold the
    /// guard until the write commits. `None` on Postgres, whose row locks
    /// need no gate.
    pub async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match self.backend {
            Backend::Sqlite => Some(self.write_gate.lock().await),
            Backend::Postgres => None,
        }
    }

    /// Starts a write transaction. SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`) so a conditional update never fails halfway on a lock
    /// upgrade.
    pub async fn begin_write(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Any>> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        }
    }
}

/// The default SQLite URL for a data directory (created if missing).
pub fn sqlite_url(path: &std::path::Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

pub fn now_unix() -> i64 {
    now_ms() / 1000
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A new time-ordered identifier with a readable prefix, e.g. `ws_0193…`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn errors_never_show_the_database_password() {
        for url in [
            "postgres://app:hunter2@127.0.0.1:1/test",
            "mysql://app:hunter2@127.0.0.1/test",
        ] {
            let error = Database::open(url, SqliteSync::Full)
                .await
                .err()
                .expect("cannot connect");
            let text = format!("{error:#} {error:?}");
            assert!(!text.contains("hunter2"), "{text}");
        }
    }
}
