//! The request log's side of retention: reading the oldest rows that may be
//! archived, in feed order, and deleting exactly those once their archive
//! file is stored. Journal postings are never touched: money history stays.
//!
//! A page is a contiguous stretch of the feed: every row between its first
//! and last position that settled before the cutoff is in it. Rows there are
//! final (the caller bounds the stretch by what every sink has delivered,
//! which is below the feed's frontier), so deleting "that stretch, settled
//! before the cutoff" removes the page's rows and nothing else, even when
//! several gateways archive at once.

use serde_json::Value;

use super::record::{LoggedRequest, logged_request_columns};
use tollgate_core::db::{Backend, Database};

/// A place in the request log's feed order, `(xid, seq)` (see
/// `tollgate_metering::feed`).
pub type FeedPosition = (i64, i64);

/// Consecutive archivable rows.
pub struct Page {
    pub rows: Vec<ArchivedRow>,
    /// The page stopped at a row that settled after the cutoff, or at the
    /// end of what may be archived: there is nothing more to read now.
    pub last: bool,
}

pub struct ArchivedRow {
    pub position: FeedPosition,
    pub request_id: String,
    pub settled_at_ms: i64,
    pub record: Value,
}

const PAGE_SQLITE: &str = concat!(
    "SELECT ",
    logged_request_columns!(),
    " FROM request_log WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3"
);
const PAGE_POSTGRES: &str = concat!(
    "SELECT ",
    logged_request_columns!(),
    " FROM request_log WHERE (xid, seq) > ($1, $2) AND (xid, seq) <= ($3, $4) ORDER BY xid, seq LIMIT $5"
);

/// The rows after `after` (exclusive) and up to `up_to` (inclusive), in feed
/// order, while they settled before `settled_before_ms`; at most `limit`.
///
/// The log is in settlement order but for clock skew between gateways, so
/// reading stops at the first row past the cutoff instead of scanning the
/// whole retained log for stragglers; a straggler goes with a later run.
pub async fn page(
    database: &Database,
    after: FeedPosition,
    up_to: FeedPosition,
    settled_before_ms: i64,
    limit: usize,
) -> sqlx::Result<Page> {
    let rows: Vec<LoggedRequest> = match database.backend {
        Backend::Sqlite => {
            sqlx::query_as(PAGE_SQLITE)
                .bind(after.1)
                .bind(up_to.1)
                .bind(limit as i64)
                .fetch_all(&database.pool)
                .await?
        }
        Backend::Postgres => {
            sqlx::query_as(PAGE_POSTGRES)
                .bind(after.0)
                .bind(after.1)
                .bind(up_to.0)
                .bind(up_to.1)
                .bind(limit as i64)
                .fetch_all(&database.pool)
                .await?
        }
    };
    let read = rows.len();
    let rows: Vec<ArchivedRow> = rows
        .into_iter()
        .take_while(|row| row.settled_at_ms < settled_before_ms)
        .map(|row| ArchivedRow {
            position: (row.xid, row.seq),
            request_id: row.request_id().to_string(),
            settled_at_ms: row.settled_at_ms,
            record: row.render(),
        })
        .collect();
    Ok(Page {
        last: rows.len() < read || read < limit,
        rows,
    })
}

/// Deletes the rows from `first` to `last` (inclusive, feed order) that
/// settled before `settled_before_ms`: exactly the rows of the pages read
/// with that cutoff. Returns how many went.
pub async fn delete(
    database: &Database,
    first: FeedPosition,
    last: FeedPosition,
    settled_before_ms: i64,
) -> sqlx::Result<u64> {
    let _turn = database.write_turn().await;
    let done = match database.backend {
        Backend::Sqlite => {
            sqlx::query("DELETE FROM request_log WHERE seq >= $1 AND seq <= $2 AND settled_at_ms < $3")
                .bind(first.1)
                .bind(last.1)
                .bind(settled_before_ms)
                .execute(&database.pool)
                .await?
        }
        Backend::Postgres => {
            sqlx::query(
                "DELETE FROM request_log WHERE (xid, seq) >= ($1, $2) AND (xid, seq) <= ($3, $4) \
                 AND settled_at_ms < $5",
            )
            .bind(first.0)
            .bind(first.1)
            .bind(last.0)
            .bind(last.1)
            .bind(settled_before_ms)
            .execute(&database.pool)
            .await?
        }
    };
    Ok(done.rows_affected())
}
