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
    /// How a connection of this process to a SQLite file is set up, so that
    /// one opened outside the pool (the ledger writer's) matches the pool's.
    sqlite: Option<SqliteSetup>,
}

#[derive(Clone, Debug)]
struct SqliteSetup {
    /// `None` for an in-memory database, which a second connection would
    /// not see.
    file: Option<std::path::PathBuf>,
    sync: SqliteSync,
    background_checkpoints: bool,
}

impl SqliteSetup {
    fn pragmas(&self) -> String {
        let synchronous = match self.sync {
            SqliteSync::Full => "FULL",
            SqliteSync::Normal => "NORMAL",
        };
        // WAL lets the CLI write while a server reads. The log file shrinks
        // back after a burst instead of keeping its largest size.
        let mut pragmas = format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON; \
             PRAGMA journal_size_limit = 16777216;"
        );
        if self.background_checkpoints {
            pragmas.push_str(" PRAGMA wal_autocheckpoint = 0;");
        }
        pragmas
    }
}

impl Database {
    /// Opens (creating, for SQLite) and migrates the database. `sync` is the
    /// SQLite commit durability; Postgres keeps its own setting.
    pub async fn open(url: &str, sync: SqliteSync) -> anyhow::Result<Self> {
        Self::open_with(url, sync, false).await
    }

    /// Opens the database for a long-running server: on SQLite a background
    /// task checkpoints the write-ahead log, so no commit stalls on a
    /// checkpoint (SQLite's automatic one runs inside the committing writer).
    pub async fn open_for_server(url: &str, sync: SqliteSync) -> anyhow::Result<Self> {
        let database = Self::open_with(url, sync, true).await?;
        if database.backend == Backend::Sqlite {
            tokio::spawn(checkpoint_in_background(database.clone()));
        }
        Ok(database)
    }

    async fn open_with(url: &str, sync: SqliteSync, background_checkpoints: bool) -> anyhow::Result<Self> {
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
        // A statement past SLOW_STATEMENT is a warning: on the request path a
        // database wait is the gateway's own latency.
        let options = options
            .log_statements(tracing::log::LevelFilter::Trace)
            .log_slow_statements(tracing::log::LevelFilter::Warn, SLOW_STATEMENT);
        let setup = (backend == Backend::Sqlite).then(|| SqliteSetup {
            file: sqlite_file(url),
            sync,
            background_checkpoints,
        });
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .acquire_timeout(Duration::from_secs(10))
            // A SQLite connection is a file handle, not a socket that can go
            // stale: a ping before every acquire would only add a round trip
            // to the connection's thread on every commit.
            .test_before_acquire(backend != Backend::Sqlite)
            .after_connect({
                let setup = setup.clone();
                move |conn, _meta| {
                    let setup = setup.clone();
                    Box::pin(async move {
                        if let Some(setup) = setup {
                            let pragmas = format!("{} PRAGMA busy_timeout = 5000;", setup.pragmas());
                            conn.execute(sqlx::AssertSqlSafe(pragmas)).await?;
                            // A new database frees pages deleted rows leave
                            // behind on request (`reclaim_space`); an older
                            // one is converted there.
                            conn.execute("PRAGMA auto_vacuum = INCREMENTAL;").await?;
                        }
                        Ok(())
                    })
                }
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
            sqlite: setup,
        })
    }

    /// A connection of its own to this database's SQLite file, set up as the
    /// pool's are, for a steady user that runs its statements in one place:
    /// the ledger writer's commits, a metering dispatcher's feed reads.
    /// `None` on Postgres and for an in-memory database.
    pub fn open_sqlite_connection(&self) -> anyhow::Result<Option<rusqlite::Connection>> {
        let Some(setup) = &self.sqlite else { return Ok(None) };
        let Some(file) = &setup.file else { return Ok(None) };
        let connection = rusqlite::Connection::open_with_flags(
            file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("cannot open {}", file.display()))?;
        connection
            .execute_batch(&setup.pragmas())
            .context("setting up a SQLite connection")?;
        Ok(Some(connection))
    }

    /// Gives the space that deleted rows left back to the file system. On
    /// SQLite that is an incremental vacuum (a database created before it was
    /// the default is converted once, with a full `VACUUM`); Postgres reuses
    /// the space itself (autovacuum), so there is nothing to do. Returns
    /// whether a conversion ran.
    pub async fn reclaim_space(&self) -> sqlx::Result<bool> {
        if self.backend != Backend::Sqlite {
            return Ok(false);
        }
        let _turn = self.write_turn().await;
        let mut conn = self.pool.acquire().await?;
        let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum").fetch_one(&mut *conn).await?;
        // 2 = incremental.
        if mode != 2 {
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;").await?;
            return Ok(true);
        }
        conn.execute("PRAGMA incremental_vacuum;").await?;
        Ok(false)
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

    /// [`Self::begin_write`] on a connection the caller keeps between
    /// transactions (a steady writer), instead of one from the pool.
    pub async fn begin_write_on<'c>(
        &self,
        connection: &'c mut sqlx::AnyConnection,
    ) -> sqlx::Result<sqlx::Transaction<'c, sqlx::Any>> {
        match self.backend {
            Backend::Sqlite => sqlx::Connection::begin_with(connection, "BEGIN IMMEDIATE").await,
            Backend::Postgres => sqlx::Connection::begin(connection).await,
        }
    }
}

/// Statements slower than this are logged as warnings (sqlx's
/// `slow statement` event, target `sqlx::query`).
pub const SLOW_STATEMENT: Duration = Duration::from_millis(100);

/// How often the background task checkpoints: often enough that the log stays
/// a few MB under load, so each checkpoint is short.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Past this many pages in the write-ahead log, the checkpointer resets it.
const RESET_LOG_AFTER_PAGES: i64 = 4096;

/// Copies committed pages from the write-ahead log into the database file
/// without blocking writers (PASSIVE).
///
/// Under steady load a passive checkpoint never finds a moment with no reader
/// on an older snapshot, so it never completes and the log never starts over:
/// it grew past a gigabyte in a minute at 1,900 requests/s. Once it holds
/// [`RESET_LOG_AFTER_PAGES`], the checkpointer takes the write turn (the
/// ledger writer queues behind it in-process) and runs a RESTART checkpoint,
/// which waits for readers to move on (milliseconds), copies the few pages
/// the passive one left, and starts the log over from its beginning.
///
/// The file keeps its size (up to `journal_size_limit`): a TRUNCATE made
/// every commit after it extend the file again, and on ext4 each extending
/// page write allocated a page-cache folio and a delayed block, which made
/// the WAL writes about 40 % of the ledger writer's time at one request at a
/// time. Overwriting the same pages costs a copy.
async fn checkpoint_in_background(database: Database) {
    let mut interval = tokio::time::interval(CHECKPOINT_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if database.pool.is_closed() {
            return;
        }
        let passive: sqlx::Result<(i64, i64, i64)> = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&database.pool)
            .await;
        let log_pages = match passive {
            Ok((_busy, log_pages, _copied)) => log_pages,
            Err(error) => {
                tracing::warn!(%error, "background WAL checkpoint failed");
                continue;
            }
        };
        if log_pages < RESET_LOG_AFTER_PAGES {
            continue;
        }
        let _turn = database.write_turn().await;
        if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(RESTART)")
            .execute(&database.pool)
            .await
        {
            tracing::warn!(%error, log_pages, "WAL reset failed; retrying at the next checkpoint");
        }
    }
}

/// The file a `sqlite:` URL names, or `None` for an in-memory database.
fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let options: sqlx::sqlite::SqliteConnectOptions = url.parse().ok()?;
    let file = options.get_filename();
    let in_memory = file.as_os_str().is_empty() || file.as_os_str() == ":memory:" || url.contains("mode=memory");
    (!in_memory).then(|| file.to_path_buf())
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
