//! The outbox table (`metering_outbox`): rows are inserted inside the ledger's
//! settle transaction, then claimed, delivered and marked by the dispatchers.
//!
//! A claim leases due rows to one claim token, so gateways sharing a Postgres
//! outbox do not deliver the same rows at once; an expired lease (the gateway
//! died) makes the rows claimable again. Delivery is at least once: a crash
//! between delivering and marking redelivers, with the same event id.

use sqlx::{Any, Transaction};

use crate::db::Database;
use crate::money::Nanos;

/// One claimed row.
#[derive(Debug, Clone)]
pub struct Pending {
    pub id: i64,
    pub event_id: String,
    pub payload: String,
}

/// Undelivered events for one sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backlog {
    pub sink: String,
    pub events: i64,
    pub oldest_created_at_ms: i64,
}

pub async fn enqueue(
    tx: &mut Transaction<'static, Any>,
    event_id: &str,
    sinks: &[String],
    payload: &str,
    cost: Nanos,
    now_ms: i64,
) -> sqlx::Result<()> {
    for sink in sinks {
        sqlx::query(
            "INSERT INTO metering_outbox (event_id, sink, payload, cost_nano, created_at, next_attempt_at) \
             VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (event_id, sink) DO NOTHING",
        )
        .bind(event_id)
        .bind(sink)
        .bind(payload)
        .bind(cost.0)
        .bind(now_ms)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Leases up to `limit` due rows of `sink` (oldest first) to `token` and returns them.
pub async fn claim(
    database: &Database,
    sink: &str,
    token: &str,
    limit: usize,
    now_ms: i64,
    lease_ms: u64,
) -> sqlx::Result<Vec<Pending>> {
    let _turn = database.write_turn().await;
    // The outer conditions repeat the inner ones so that, on Postgres, a row
    // another gateway leased meanwhile is re-checked and skipped.
    let mut rows: Vec<(i64, String, String)> = sqlx::query_as(
        "UPDATE metering_outbox SET lease_owner = $1, lease_until = $2 \
         WHERE id IN (SELECT id FROM metering_outbox \
                      WHERE sink = $3 AND delivered_at IS NULL AND next_attempt_at <= $4 \
                        AND (lease_until IS NULL OR lease_until < $4) \
                      ORDER BY id LIMIT $5) \
           AND delivered_at IS NULL AND (lease_until IS NULL OR lease_until < $4) \
         RETURNING id, event_id, payload",
    )
    .bind(token)
    .bind(now_ms + lease_ms as i64)
    .bind(sink)
    .bind(now_ms)
    .bind(limit as i64)
    .fetch_all(&database.pool)
    .await?;
    // RETURNING gives no order; deliveries go oldest first.
    rows.sort_unstable_by_key(|row| row.0);
    Ok(rows
        .into_iter()
        .map(|(id, event_id, payload)| Pending { id, event_id, payload })
        .collect())
}

/// Records a delivery of the claimed rows: those up to `delivered_through` (an
/// id, inclusive) are delivered; the rest are released for a retry at
/// `retry_at_ms` with `error`.
pub async fn settle_claim(
    database: &Database,
    token: &str,
    delivered_through: Option<i64>,
    now_ms: i64,
    retry_at_ms: i64,
    error: Option<&str>,
) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    let mut tx = database.begin_write().await?;
    if let Some(last) = delivered_through {
        sqlx::query(
            "UPDATE metering_outbox SET delivered_at = $1, lease_owner = NULL, lease_until = NULL, \
             attempts = attempts + 1, last_error = NULL \
             WHERE lease_owner = $2 AND id <= $3 AND delivered_at IS NULL",
        )
        .bind(now_ms)
        .bind(token)
        .bind(last)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query(
        "UPDATE metering_outbox SET lease_owner = NULL, lease_until = NULL, attempts = attempts + 1, \
         next_attempt_at = $1, last_error = $2 \
         WHERE lease_owner = $3 AND delivered_at IS NULL",
    )
    .bind(retry_at_ms)
    .bind(error)
    .bind(token)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Deletes delivered rows older than `before_ms`; returns how many.
pub async fn purge_delivered(database: &Database, before_ms: i64) -> sqlx::Result<u64> {
    let _turn = database.write_turn().await;
    Ok(
        sqlx::query("DELETE FROM metering_outbox WHERE delivered_at IS NOT NULL AND delivered_at < $1")
            .bind(before_ms)
            .execute(&database.pool)
            .await?
            .rows_affected(),
    )
}

/// Undelivered events per sink, including sinks no longer configured.
pub async fn backlog(database: &Database) -> sqlx::Result<Vec<Backlog>> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT sink, COUNT(*), MIN(created_at) FROM metering_outbox WHERE delivered_at IS NULL \
         GROUP BY sink ORDER BY sink",
    )
    .fetch_all(&database.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(sink, events, oldest_created_at_ms)| Backlog {
            sink,
            events,
            oldest_created_at_ms,
        })
        .collect())
}
