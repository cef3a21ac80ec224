//! The database connection. SQLite in the data directory is the embedded default;
//! it runs in WAL mode so the CLI can write (e.g. create an account) while a
//! server reads.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub type Db = SqlitePool;

pub async fn open(url: &str) -> anyhow::Result<Db> {
    anyhow::ensure!(
        url.starts_with("sqlite:"),
        "database_url '{url}': only sqlite: URLs are supported by this build"
    );
    let options = SqliteConnectOptions::from_str(url)
        .with_context(|| format!("invalid database_url '{url}'"))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .with_context(|| format!("cannot open database {url}"))?;
    sqlx::migrate!("./migrations/sqlite")
        .run(&pool)
        .await
        .context("database migration failed")?;
    Ok(pool)
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A new time-ordered identifier with a readable prefix, e.g. `ws_0193…`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}
