//! The usage feed: settled requests, read from the request log in commit order
//! after each sink's cursor.
//!
//! The settle transaction writes the `request_log` row, and that row is the
//! event: metering writes nothing else on the request path. Each sink has a
//! cursor (`metering_cursors`), the [`Position`] of the last row it delivered.
//! A dispatcher leases the cursor before delivering, so gateways sharing a
//! Postgres database never deliver the same sink at once; an expired lease (the
//! gateway died) is taken over. Delivery is at least once: a crash between
//! delivering and advancing the cursor delivers those events again, with the
//! same ids.
//!
//! Why the cursor cannot pass a row that commits later:
//! - SQLite has one writer at a time and `seq` is `AUTOINCREMENT`, so `seq`
//!   order is commit order; `xid` is always 0.
//! - Postgres hands out `seq` at insert but commits in any order. Each row
//!   carries its transaction id, and a read takes only rows whose `xid` is below
//!   the snapshot's `xmin` (the [`frontier`]): every transaction below it has
//!   ended, so no row at or before the new cursor can appear afterwards.

use std::sync::{Arc, Mutex};

use tollgate_core::db::{Backend, Database};

/// A place in the feed. Rows are ordered by `(xid, seq)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub xid: i64,
    pub seq: i64,
}

/// A settled, metered request: everything its usage event says.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SettledRequest {
    pub xid: i64,
    pub seq: i64,
    pub request_id: String,
    pub key_id: String,
    pub workspace_id: String,
    pub model: String,
    pub provider: Option<String>,
    pub upstream_model: Option<String>,
    pub streamed: i64,
    pub outcome: String,
    pub status: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub reasoning_tokens: Option<i64>,
    pub usage_source: String,
    /// What the ledger posted for the request.
    pub cost_nano: i64,
    pub snapshot_id: Option<i64>,
    pub attempt_count: i64,
    pub duration_ms: i64,
    pub settled_at_ms: i64,
    /// The serving gateway's CloudEvents `source`; `None` on rows older than it.
    pub source: Option<String>,
    /// `chat`, `tool_call`, `skill_run`, `actor_run` or `budget_alert`: which
    /// event type the row becomes.
    pub kind: String,
    /// The request this one ran inside (a skill's model and tool calls).
    pub parent_request_id: Option<String>,
    /// The plan's gateway fee within `cost_nano`.
    pub fee_nano: i64,
    /// A budget alert's data (a JSON object); `None` on request rows.
    pub detail: Option<String>,
}

impl SettledRequest {
    pub fn position(&self) -> Position {
        Position {
            xid: self.xid,
            seq: self.seq,
        }
    }
}

/// Undelivered events for one sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backlog {
    pub sink: String,
    pub events: i64,
    pub oldest_settled_at_ms: Option<i64>,
}

// A chat request refused before any upstream call (402, or a 4xx for a bad
// body or an unknown model) is logged but not metered. On SQLite,
// `xid = $1 AND seq > $2` keeps the scan on the rowid; Postgres uses the
// (xid, seq) index.
const READ_SQLITE: &str = "SELECT xid, seq, request_id, key_id, workspace_id, model, provider, upstream_model, \
     streamed, outcome, status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, \
     snapshot_id, attempt_count, duration_ms, settled_at_ms, source, kind, parent_request_id, fee_nano, detail FROM request_log \
     WHERE xid = $1 AND seq > $2 AND xid < $3 \
     AND NOT (kind = 'chat' AND attempt_count = 0 AND COALESCE(status, 0) >= 400) ORDER BY seq LIMIT $4";
const READ_POSTGRES: &str = "SELECT xid, seq, request_id, key_id, workspace_id, model, provider, upstream_model, \
     streamed, outcome, status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, \
     snapshot_id, attempt_count, duration_ms, settled_at_ms, source, kind, parent_request_id, fee_nano, detail FROM request_log \
     WHERE (xid, seq) > ($1, $2) AND xid < $3 \
     AND NOT (kind = 'chat' AND attempt_count = 0 AND COALESCE(status, 0) >= 400) ORDER BY xid, seq LIMIT $4";

// The backlog reads counters and one index entry per sink, never a count
// of rows: the count over every row past each cursor grew with the table and
// stalled for seconds every 30 s (issue 41's soak). The number is the log's
// newest sequence number less the cursor's, so rows the feed skips (refusals
// before any upstream call) are counted too; on Postgres, rows whose
// transactions commit out of order make it approximate. The oldest is the
// first row after the cursor, by the feed's own index.
const BACKLOG_SQLITE: &str = "SELECT c.sink, \
     MAX(COALESCE((SELECT MAX(seq) FROM request_log), 0) - c.seq, 0), \
     (SELECT r.settled_at_ms FROM request_log r WHERE r.xid = c.xid AND r.seq > c.seq ORDER BY r.seq LIMIT 1) \
     FROM metering_cursors c ORDER BY c.sink";
const BACKLOG_POSTGRES: &str = "SELECT c.sink, \
     GREATEST((SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM request_log_seq_seq) - c.seq, 0), \
     (SELECT r.settled_at_ms FROM request_log r WHERE (r.xid, r.seq) > (c.xid, c.seq) ORDER BY r.xid, r.seq LIMIT 1) \
     FROM metering_cursors c ORDER BY c.sink";

/// Rows with an `xid` below this are final: no transaction that could still
/// add one is running.
pub async fn frontier(database: &Database) -> sqlx::Result<i64> {
    match database.backend {
        Backend::Sqlite => Ok(i64::MAX),
        Backend::Postgres => {
            sqlx::query_scalar("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
                .fetch_one(&database.pool)
                .await
        }
    }
}

/// Reads the feed for one dispatcher. On a SQLite file it has a connection
/// of its own and reads on a blocking thread: through the pool, each row
/// crossed from sqlx's connection thread to the runtime one at a time and was
/// converted twice (to sqlx's `Any` row, then to a [`SettledRequest`]), about
/// a tenth of a busy gateway's CPU. Elsewhere (Postgres, an in-memory
/// database) it reads through the pool.
pub struct Reader {
    database: Database,
    own: Option<Arc<Mutex<rusqlite::Connection>>>,
}

impl Reader {
    pub fn open(database: &Database) -> anyhow::Result<Self> {
        let own = database
            .open_sqlite_connection()?
            .map(|connection| Arc::new(Mutex::new(connection)));
        Ok(Self {
            database: database.clone(),
            own,
        })
    }

    /// Up to `limit` metered requests after `after`, in feed order.
    pub async fn read(&self, after: Position, limit: usize) -> anyhow::Result<Vec<SettledRequest>> {
        let Some(own) = &self.own else {
            return Ok(read(&self.database, after, limit).await?);
        };
        let own = own.clone();
        let rows = tokio::task::spawn_blocking(move || {
            let connection = own.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            read_sqlite(&connection, after, limit)
        })
        .await??;
        Ok(rows)
    }
}

fn read_sqlite(
    connection: &rusqlite::Connection,
    after: Position,
    limit: usize,
) -> rusqlite::Result<Vec<SettledRequest>> {
    let mut statement = connection.prepare_cached(READ_SQLITE)?;
    let rows = statement.query_map(
        // On SQLite every committed row is final (see `frontier`).
        rusqlite::params![after.xid, after.seq, i64::MAX, limit as i64],
        |row| {
            Ok(SettledRequest {
                xid: row.get(0)?,
                seq: row.get(1)?,
                request_id: row.get(2)?,
                key_id: row.get(3)?,
                workspace_id: row.get(4)?,
                model: row.get(5)?,
                provider: row.get(6)?,
                upstream_model: row.get(7)?,
                streamed: row.get(8)?,
                outcome: row.get(9)?,
                status: row.get(10)?,
                input_tokens: row.get(11)?,
                output_tokens: row.get(12)?,
                cached_tokens: row.get(13)?,
                reasoning_tokens: row.get(14)?,
                usage_source: row.get(15)?,
                cost_nano: row.get(16)?,
                snapshot_id: row.get(17)?,
                attempt_count: row.get(18)?,
                duration_ms: row.get(19)?,
                settled_at_ms: row.get(20)?,
                source: row.get(21)?,
                kind: row.get(22)?,
                parent_request_id: row.get(23)?,
                fee_nano: row.get(24)?,
                detail: row.get(25)?,
            })
        },
    )?;
    rows.collect()
}

/// Up to `limit` metered requests after `after`, in feed order, through the pool.
pub async fn read(database: &Database, after: Position, limit: usize) -> sqlx::Result<Vec<SettledRequest>> {
    let frontier = frontier(database).await?;
    let sql = match database.backend {
        Backend::Sqlite => READ_SQLITE,
        Backend::Postgres => READ_POSTGRES,
    };
    sqlx::query_as(sql)
        .bind(after.xid)
        .bind(after.seq)
        .bind(frontier)
        .bind(limit as i64)
        .fetch_all(&database.pool)
        .await
}

/// The last final position: a cursor placed here receives every request
/// settled from now on.
pub async fn head(database: &Database) -> sqlx::Result<Position> {
    let frontier = frontier(database).await?;
    // On SQLite every xid is 0 and seq is the rowid: the last row is one step.
    let sql = match database.backend {
        Backend::Sqlite => "SELECT xid, seq FROM request_log WHERE xid < $1 ORDER BY seq DESC LIMIT 1",
        Backend::Postgres => "SELECT xid, seq FROM request_log WHERE xid < $1 ORDER BY xid DESC, seq DESC LIMIT 1",
    };
    let last: Option<(i64, i64)> = sqlx::query_as(sql)
        .bind(frontier)
        .fetch_optional(&database.pool)
        .await?;
    Ok(last.map_or(Position::default(), |(xid, seq)| Position { xid, seq }))
}

/// The last position every sink's cursor has passed: rows at or before it
/// have been delivered wherever they go (retention may archive them). With
/// no sink at all, every final row qualifies.
pub async fn delivered_everywhere(database: &Database) -> sqlx::Result<Position> {
    let slowest: Option<(i64, i64)> = sqlx::query_as("SELECT xid, seq FROM metering_cursors ORDER BY xid, seq LIMIT 1")
        .fetch_optional(&database.pool)
        .await?;
    Ok(match slowest {
        Some((xid, seq)) => Position { xid, seq },
        None => Position {
            xid: frontier(database).await?.saturating_sub(1),
            seq: i64::MAX,
        },
    })
}

/// Gives `sink` a cursor at the head of the feed if it has none. A new sink
/// receives the events of requests settled from now on; a sink that had a
/// cursor before resumes where it stopped.
pub async fn ensure_cursor(database: &Database, sink: &str, now_ms: i64) -> sqlx::Result<()> {
    let head = head(database).await?;
    let _turn = database.write_turn().await;
    sqlx::query(
        "INSERT INTO metering_cursors (sink, xid, seq, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (sink) DO NOTHING",
    )
    .bind(sink)
    .bind(head.xid)
    .bind(head.seq)
    .bind(now_ms)
    .execute(&database.pool)
    .await?;
    Ok(())
}

/// Leases the sink's cursor to `owner` until `now_ms + lease_ms`, if it is
/// free, expired or already `owner`'s; returns its position, or `None` while
/// another dispatcher holds it.
pub async fn lease(
    database: &Database,
    sink: &str,
    owner: &str,
    now_ms: i64,
    lease_ms: u64,
) -> sqlx::Result<Option<Position>> {
    let _turn = database.write_turn().await;
    let position: Option<(i64, i64)> = sqlx::query_as(
        "UPDATE metering_cursors SET lease_owner = $1, lease_until = $2, updated_at = $3 \
         WHERE sink = $4 AND (lease_owner = $1 OR lease_until IS NULL OR lease_until < $3) \
         RETURNING xid, seq",
    )
    .bind(owner)
    .bind(now_ms + lease_ms as i64)
    .bind(now_ms)
    .bind(sink)
    .fetch_optional(&database.pool)
    .await?;
    Ok(position.map(|(xid, seq)| Position { xid, seq }))
}

/// Records a delivery attempt: moves the cursor to `to` (the last delivered
/// row) and renews the lease. With `error`, the attempt counts as a failure.
/// Returns false when `owner` no longer holds the cursor; the new holder
/// delivers from the stored position.
pub async fn advance(
    database: &Database,
    sink: &str,
    owner: &str,
    to: Position,
    error: Option<&str>,
    now_ms: i64,
    lease_ms: u64,
) -> sqlx::Result<bool> {
    let _turn = database.write_turn().await;
    let updated = sqlx::query(
        "UPDATE metering_cursors SET xid = $1, seq = $2, lease_until = $3, updated_at = $4, \
         failures = CASE WHEN $5 = 0 THEN 0 ELSE failures + 1 END, last_error = $6 \
         WHERE sink = $7 AND lease_owner = $8",
    )
    .bind(to.xid)
    .bind(to.seq)
    .bind(now_ms + lease_ms as i64)
    .bind(now_ms)
    .bind(i64::from(error.is_some()))
    .bind(error)
    .bind(sink)
    .bind(owner)
    .execute(&database.pool)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// Gives up `owner`'s lease on the sink's cursor, so that a restarted or
/// another gateway delivers at once instead of after the lease runs out.
pub async fn release(database: &Database, sink: &str, owner: &str) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    sqlx::query(
        "UPDATE metering_cursors SET lease_owner = NULL, lease_until = NULL WHERE sink = $1 AND lease_owner = $2",
    )
    .bind(sink)
    .bind(owner)
    .execute(&database.pool)
    .await?;
    Ok(())
}

/// How far each of `sinks` is behind the log: rows after its cursor and the
/// oldest one's settlement time. Cursors of sinks no longer configured are
/// left alone: such a sink resumes if it comes back.
pub async fn backlog(database: &Database, sinks: &[String]) -> sqlx::Result<Vec<Backlog>> {
    let sql = match database.backend {
        Backend::Sqlite => BACKLOG_SQLITE,
        Backend::Postgres => BACKLOG_POSTGRES,
    };
    let rows: Vec<(String, i64, Option<i64>)> = sqlx::query_as(sql).fetch_all(&database.pool).await?;
    Ok(rows
        .into_iter()
        .filter(|(sink, _, _)| sinks.contains(sink))
        .map(|(sink, events, oldest_settled_at_ms)| Backlog {
            sink,
            events,
            oldest_settled_at_ms,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::db::{SqliteSync, sqlite_url};

    #[tokio::test]
    async fn the_sqlite_reader_returns_what_the_pool_returns_column_for_column() {
        let dir = tempfile::tempdir().unwrap();
        let database = Database::open(&sqlite_url(&dir.path().join("feed.db")), SqliteSync::Normal)
            .await
            .unwrap();
        // Every optional column set, every optional column empty, and a
        // refusal (no provider tried), which the feed leaves out.
        sqlx::query(
            "INSERT INTO request_log (request_id, key_id, workspace_id, model, provider, upstream_model, streamed, \
             outcome, status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, \
             reserved_nano, snapshot_id, attempts, attempt_count, started_at_ms, duration_ms, settled_at_ms, source, \
             kind, parent_request_id, fee_nano, detail) VALUES \
             ('req_full', 'key_1', 'ws_1', 'acme/small', 'acme', 'small', 1, 'success', 200, 9, 3, 2, 1, 'upstream', \
              9500, 10000, 4, '[]', 2, 100, 12, 112, 'urn:tollgate:instance:a', 'tool_call', 'req_parent', 1000, \
              '{\"k\":1}'), \
             ('req_bare', 'key_1', 'ws_1', 'acme/small', NULL, NULL, 0, 'upstream_error', NULL, NULL, NULL, NULL, \
              NULL, 'none', 0, 10, NULL, '[]', 1, 100, 5, 105, NULL, 'chat', NULL, 0, NULL), \
             ('req_refused', 'key_1', 'ws_1', 'acme/small', NULL, NULL, 0, 'insufficient_funds', 402, NULL, NULL, \
              NULL, NULL, 'none', 0, 0, NULL, '[]', 0, 100, 1, 101, NULL, 'chat', NULL, 0, NULL)",
        )
        .execute(&database.pool)
        .await
        .unwrap();

        let reader = Reader::open(&database).unwrap();
        assert!(reader.own.is_some(), "a SQLite file gets a connection of its own");
        let own = reader.read(Position::default(), 10).await.unwrap();
        let pooled = read(&database, Position::default(), 10).await.unwrap();
        let ids: Vec<&str> = own.iter().map(|row| row.request_id.as_str()).collect();
        assert_eq!(ids, ["req_full", "req_bare"]);
        assert_eq!(format!("{own:?}"), format!("{pooled:?}"));
        // The limit and the position hold.
        let rest = reader.read(own[0].position(), 1).await.unwrap();
        assert_eq!(format!("{rest:?}"), format!("{:?}", &pooled[1..]));
    }

    /// The backlog is the rows after each cursor and the first one's time,
    /// read from counters and the feed's index.
    #[tokio::test]
    async fn the_backlog_counts_rows_after_each_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let database = Database::open(&sqlite_url(&dir.path().join("feed.db")), SqliteSync::Normal)
            .await
            .unwrap();
        let sinks = ["behind".to_string(), "current".to_string()];
        ensure_cursor(&database, "behind", 1).await.unwrap();
        assert_eq!(
            backlog(&database, &sinks).await.unwrap(),
            [Backlog {
                sink: "behind".into(),
                events: 0,
                oldest_settled_at_ms: None
            }]
        );
        for (id, settled) in [("req_1", 1_000), ("req_2", 2_000), ("req_3", 3_000)] {
            sqlx::query(
                "INSERT INTO request_log (request_id, key_id, workspace_id, model, streamed, outcome, usage_source, \
                 cost_nano, reserved_nano, attempts, attempt_count, started_at_ms, duration_ms, settled_at_ms, kind) \
                 VALUES ($1, 'key_1', 'ws_1', 'acme/small', 0, 'success', 'upstream', 1, 1, '[]', 1, 0, 1, $2, 'chat')",
            )
            .bind(id)
            .bind(settled)
            .execute(&database.pool)
            .await
            .unwrap();
        }
        ensure_cursor(&database, "current", 1).await.unwrap();
        let found = backlog(&database, &sinks).await.unwrap();
        assert_eq!(
            found,
            [
                Backlog {
                    sink: "behind".into(),
                    events: 3,
                    oldest_settled_at_ms: Some(1_000)
                },
                Backlog {
                    sink: "current".into(),
                    events: 0,
                    oldest_settled_at_ms: None
                },
            ]
        );
    }
}
