//! The statements of a ledger commit, run either through sqlx (Postgres) or
//! directly on a SQLite connection the writer owns.
//!
//! sqlx runs each SQLite statement on the connection's own thread, so every
//! statement costs the writer a round trip between threads: a settlement's
//! commit took six (begin, two inserts, two updates, commit), each two thread
//! switches, on the path of every answer. The writer's own connection runs
//! them in place, on the writer task, where the commit was waited for anyway.
//! The SQL text is the same for both; only how it is run differs.

use std::future::{Future, ready};

/// One value bound to a statement. The type travels with a null: Postgres
/// rejects a null typed as an integer for a text column.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Int(Option<i64>),
    Text(Option<&'a str>),
}

impl From<i64> for Value<'_> {
    fn from(value: i64) -> Self {
        Value::Int(Some(value))
    }
}

impl From<Option<i64>> for Value<'_> {
    fn from(value: Option<i64>) -> Self {
        Value::Int(value)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(value: &'a str) -> Self {
        Value::Text(Some(value))
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(value: &'a String) -> Self {
        Value::Text(Some(value))
    }
}

impl<'a> From<Option<&'a str>> for Value<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Value::Text(value)
    }
}

impl<'a> From<&'a Option<String>> for Value<'a> {
    fn from(value: &'a Option<String>) -> Self {
        Value::Text(value.as_deref())
    }
}

/// Why a commit failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

pub type WriteResult<T> = Result<T, WriteError>;

/// An open write transaction. Parameters are `$N` (by number) or `?` (in
/// order), as in the statement's text.
pub trait WriteTx: Send {
    /// Runs a statement; returns the rows it changed.
    fn execute(
        &mut self,
        statement: &'static str,
        values: &[Value<'_>],
    ) -> impl Future<Output = WriteResult<u64>> + Send;

    /// Runs a statement that yields at most one integer (a `SELECT` or a
    /// `RETURNING`); `None` when it yields no row.
    fn fetch_i64(
        &mut self,
        statement: &'static str,
        values: &[Value<'_>],
    ) -> impl Future<Output = WriteResult<Option<i64>>> + Send;

    /// Commits the transaction.
    fn commit(self) -> impl Future<Output = WriteResult<()>> + Send
    where
        Self: Sized;
}

impl WriteTx for sqlx::Transaction<'_, sqlx::Any> {
    async fn execute(&mut self, statement: &'static str, values: &[Value<'_>]) -> WriteResult<u64> {
        let query = values.iter().fold(sqlx::query(statement), |query, value| match *value {
            Value::Int(value) => query.bind(value),
            Value::Text(value) => query.bind(value),
        });
        Ok(query.execute(&mut **self).await?.rows_affected())
    }

    async fn fetch_i64(&mut self, statement: &'static str, values: &[Value<'_>]) -> WriteResult<Option<i64>> {
        let query = values
            .iter()
            .fold(sqlx::query_scalar(statement), |query, value| match *value {
                Value::Int(value) => query.bind(value),
                Value::Text(value) => query.bind(value),
            });
        Ok(query.fetch_optional(&mut **self).await?)
    }

    async fn commit(self) -> WriteResult<()> {
        Ok(sqlx::Transaction::commit(self).await?)
    }
}

/// A write transaction on the writer's own SQLite connection (`BEGIN
/// IMMEDIATE` taken by [`SqliteWriter::begin`]). Its futures are ready at
/// once: SQLite works in place.
pub struct SqliteTx<'c> {
    connection: &'c mut rusqlite::Connection,
    fsyncs: bool,
}

impl SqliteTx<'_> {
    /// Commits. With `synchronous = FULL` the commit waits for an fsync
    /// (about a millisecond here): on a multi-threaded runtime this thread's
    /// other tasks move to another thread for that time instead of waiting.
    pub fn commit(self) -> WriteResult<()> {
        let commit = || self.connection.execute_batch("COMMIT");
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        Ok(match self.fsyncs && multi_thread {
            true => tokio::task::block_in_place(commit),
            false => commit(),
        }?)
    }
}

impl WriteTx for SqliteTx<'_> {
    fn execute(
        &mut self,
        statement: &'static str,
        values: &[Value<'_>],
    ) -> impl Future<Output = WriteResult<u64>> + Send {
        ready(run(self.connection, statement, values, |statement| {
            Ok(statement.raw_execute()? as u64)
        }))
    }

    fn fetch_i64(
        &mut self,
        statement: &'static str,
        values: &[Value<'_>],
    ) -> impl Future<Output = WriteResult<Option<i64>>> + Send {
        ready(run(self.connection, statement, values, |statement| {
            let mut rows = statement.raw_query();
            match rows.next()? {
                Some(row) => Ok(row.get::<_, Option<i64>>(0)?),
                None => Ok(None),
            }
        }))
    }

    fn commit(self) -> impl Future<Output = WriteResult<()>> + Send {
        ready(SqliteTx::commit(self))
    }
}

/// Prepares (from the connection's cache), binds and runs one statement.
/// Parameters bind the way sqlx binds them: `$N` is the N-th value, and each
/// anonymous `?` the next one.
fn run<T>(
    connection: &rusqlite::Connection,
    statement: &str,
    values: &[Value<'_>],
    then: impl FnOnce(&mut rusqlite::CachedStatement<'_>) -> rusqlite::Result<T>,
) -> WriteResult<T> {
    let mut prepared = connection.prepare_cached(statement)?;
    let mut next = 0;
    for index in 1..=prepared.parameter_count() {
        let position = match prepared.parameter_name(index) {
            Some(name) => name
                .strip_prefix('$')
                .and_then(|number| number.parse::<usize>().ok())
                .and_then(|number| number.checked_sub(1))
                .ok_or_else(|| rusqlite::Error::InvalidParameterName(name.to_string()))?,
            None => {
                next += 1;
                next - 1
            }
        };
        let value = values
            .get(position)
            .copied()
            .ok_or(rusqlite::Error::InvalidParameterCount(
                values.len(),
                prepared.parameter_count(),
            ))?;
        match value {
            Value::Int(value) => prepared.raw_bind_parameter(index, value)?,
            Value::Text(value) => prepared.raw_bind_parameter(index, value)?,
        }
    }
    let result = then(&mut prepared);
    // A cached statement keeps its bindings; clear them so that no text
    // borrowed from this commit outlives it inside SQLite.
    prepared.clear_bindings();
    Ok(result?)
}

/// How long the writer waits for SQLite's write lock, which another
/// connection (an admin write, the CLI) may hold, before the commit fails.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The ledger writer's own connection to a SQLite database file.
pub struct SqliteWriter {
    connection: rusqlite::Connection,
    /// `synchronous = FULL`: every commit waits for an fsync.
    fsyncs: bool,
}

impl SqliteWriter {
    /// Takes over a connection (see [`Self::begin`] for the lock wait).
    pub fn new(connection: rusqlite::Connection) -> WriteResult<Self> {
        connection.busy_timeout(std::time::Duration::ZERO)?;
        // Every batch size of both inserts, and the row statements.
        connection.set_prepared_statement_cache_capacity(32);
        // 2 = FULL, 3 = EXTRA.
        let synchronous: i64 = connection.query_row("PRAGMA synchronous", [], |row| row.get(0))?;
        Ok(Self {
            connection,
            fsyncs: synchronous >= 2,
        })
    }

    /// Takes SQLite's write lock (`BEGIN IMMEDIATE`). The connection has no
    /// busy timeout, so a lock another connection holds is waited out here,
    /// asynchronously, instead of in SQLite's busy handler, which would
    /// sleep on the runtime's thread.
    pub async fn begin(&mut self) -> WriteResult<SqliteTx<'_>> {
        let started = tokio::time::Instant::now();
        let mut pause = std::time::Duration::from_micros(250);
        loop {
            match self.connection.execute_batch("BEGIN IMMEDIATE") {
                Ok(()) => {
                    return Ok(SqliteTx {
                        connection: &mut self.connection,
                        fsyncs: self.fsyncs,
                    });
                }
                Err(error) if is_busy(&error) && started.elapsed() < LOCK_WAIT => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_millis(10));
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Ends a failed transaction (if SQLite has not ended it already).
    pub fn rollback(&mut self) {
        if !self.connection.is_autocommit()
            && let Err(error) = self.connection.execute_batch("ROLLBACK")
        {
            tracing::warn!(%error, "ledger writer rollback failed");
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> SqliteWriter {
        let connection = rusqlite::Connection::open_in_memory().unwrap();
        connection
            .execute_batch("CREATE TABLE t (a INTEGER, b TEXT, c INTEGER)")
            .unwrap();
        SqliteWriter::new(connection).unwrap()
    }

    #[tokio::test]
    async fn parameters_bind_as_sqlx_binds_them() {
        let mut writer = table();
        let mut tx = writer.begin().await.unwrap();
        // A numbered parameter used twice, then the next ones in order.
        let changed = tx
            .execute(
                "INSERT INTO t (a, b, c) VALUES ($1, $2, $1 + $3)",
                &[7.into(), "seven".into(), 1.into()],
            )
            .await
            .unwrap();
        assert_eq!(changed, 1);
        // Anonymous parameters over two rows, with typed nulls.
        let changed = tx
            .execute(
                "INSERT INTO t (a, b, c) VALUES (?, ?, ?), (?, ?, ?)",
                &[
                    Value::Int(None),
                    "x".into(),
                    2.into(),
                    3.into(),
                    Value::Text(None),
                    4.into(),
                ],
            )
            .await
            .unwrap();
        assert_eq!(changed, 2);
        let sum = tx
            .fetch_i64("SELECT c FROM t WHERE a = $1 AND b = $2", &[7.into(), "seven".into()])
            .await
            .unwrap();
        assert_eq!(sum, Some(8));
        let nulls = tx
            .fetch_i64("SELECT count(*) FROM t WHERE a IS NULL OR b IS NULL", &[])
            .await
            .unwrap();
        assert_eq!(nulls, Some(2));
        let none = tx
            .fetch_i64("SELECT a FROM t WHERE a = $1", &[99.into()])
            .await
            .unwrap();
        assert_eq!(none, None);
        let missing = tx.execute("INSERT INTO t (a, b) VALUES ($1, $2)", &[1.into()]).await;
        assert!(missing.is_err(), "too few values is an error, not a NULL");
        tx.commit().unwrap();
    }

    #[tokio::test]
    async fn a_failed_transaction_rolls_back() {
        let mut writer = table();
        let mut tx = writer.begin().await.unwrap();
        tx.execute("INSERT INTO t (a) VALUES ($1)", &[1.into()]).await.unwrap();
        assert!(
            tx.execute("INSERT INTO nowhere (a) VALUES ($1)", &[1.into()])
                .await
                .is_err()
        );
        writer.rollback();
        let mut tx = writer.begin().await.unwrap();
        assert_eq!(tx.fetch_i64("SELECT count(*) FROM t", &[]).await.unwrap(), Some(0));
        tx.commit().unwrap();
    }

    #[tokio::test]
    async fn begin_waits_for_another_connections_write_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let other = rusqlite::Connection::open(&path).unwrap();
        other
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (a INTEGER); BEGIN IMMEDIATE")
            .unwrap();
        let mut writer = SqliteWriter::new(rusqlite::Connection::open(&path).unwrap()).unwrap();
        let held = std::time::Duration::from_millis(80);
        let started = std::time::Instant::now();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(held);
            other.execute_batch("INSERT INTO t VALUES (1); COMMIT").unwrap();
        });
        let mut tx = writer.begin().await.unwrap();
        assert!(
            started.elapsed() >= held,
            "took the lock while another connection held it"
        );
        assert_eq!(tx.fetch_i64("SELECT count(*) FROM t", &[]).await.unwrap(), Some(1));
        tx.commit().unwrap();
        releaser.join().unwrap();
    }

    async fn commit_with_full_sync() {
        let dir = tempfile::tempdir().unwrap();
        let connection = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
        connection
            .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE t (a INTEGER)")
            .unwrap();
        let mut writer = SqliteWriter::new(connection).unwrap();
        assert!(writer.fsyncs);
        let mut tx = writer.begin().await.unwrap();
        tx.execute("INSERT INTO t (a) VALUES ($1)", &[1.into()]).await.unwrap();
        tx.commit().unwrap();
        let mut tx = writer.begin().await.unwrap();
        assert_eq!(tx.fetch_i64("SELECT count(*) FROM t", &[]).await.unwrap(), Some(1));
        tx.commit().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_durable_commit_works_on_a_multi_threaded_runtime() {
        commit_with_full_sync().await;
    }

    #[tokio::test]
    async fn a_durable_commit_works_on_a_current_thread_runtime() {
        commit_with_full_sync().await;
    }
}
