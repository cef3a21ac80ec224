//! The audit log's export: each sink also receives every audit row as a
//! `dev.tollgate.audit.v1` CloudEvent, at least once, in chain order.
//!
//! Audit rows are few (control-plane changes, not requests), so a dispatcher
//! per sink polls the log after its own cursor (`audit_cursors`, apart from
//! the request log's) instead of being woken. The cursor is leased like the
//! usage feed's, so gateways sharing a database deliver each row from one
//! place. A row's event id is its hash: a redelivery is the same event, and
//! a receiver holding the events can re-check the chain itself.

use std::sync::Arc;
use std::time::Duration;

use cloudevents::{EventBuilder, EventBuilderV10};

use super::config::MeteringConfig;
use super::event::Identity;
use super::sinks::{Sink, StoredEvent};
use tollgate_audit::{AuditLog, Record};
use tollgate_core::db::{Database, now_ms};

pub const AUDIT_EVENT_TYPE: &str = "dev.tollgate.audit.v1";
/// Where the gateway serves the event data's JSON Schema.
pub const AUDIT_SCHEMA_PATH: &str = "/schemas/audit.v1.json";
pub const AUDIT_SCHEMA: &str = include_str!("../../../docs/schemas/audit.v1.json");

/// The structured-mode JSON of one audit row's event.
pub fn audit_event_json(identity: &Identity, record: &Record) -> anyhow::Result<String> {
    let dataschema = identity
        .dataschema
        .replace(super::event::SCHEMA_PATH, AUDIT_SCHEMA_PATH);
    let time = chrono::DateTime::from_timestamp_millis(record.at_ms).unwrap_or_default();
    let mut event = EventBuilderV10::new()
        .id(record.hash.as_str())
        .source(identity.source.as_str())
        .ty(AUDIT_EVENT_TYPE)
        .time(time)
        .data_with_schema("application/json", dataschema, serde_json::to_value(record)?);
    if let Some(workspace_id) = &record.workspace_id {
        event = event.subject(workspace_id.as_str());
    }
    Ok(serde_json::to_string(&event.build()?)?)
}

/// Creates `sink`'s audit cursor at the log's head if it has none: like a
/// usage cursor, a new sink receives what happens from now on.
pub async fn ensure_cursor(database: &Database, sink: &str) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    sqlx::query(
        "INSERT INTO audit_cursors (sink, seq, updated_at) \
         SELECT $1, head_seq, $2 FROM audit_chain WHERE id = 1 ON CONFLICT (sink) DO NOTHING",
    )
    .bind(sink)
    .bind(now_ms())
    .execute(&database.pool)
    .await?;
    Ok(())
}

/// The last row every sink has delivered, or `None` when no sink has a
/// cursor: retention archives audit rows only up to it.
pub async fn delivered_everywhere(database: &Database) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("SELECT MIN(seq) FROM audit_cursors")
        .fetch_one(&database.pool)
        .await
}

/// Hands `sink`'s audit cursor back on a graceful shutdown.
pub async fn release(database: &Database, sink: &str, owner: &str) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    sqlx::query("UPDATE audit_cursors SET lease_owner = NULL, lease_until = NULL WHERE sink = $1 AND lease_owner = $2")
        .bind(sink)
        .bind(owner)
        .execute(&database.pool)
        .await?;
    Ok(())
}

pub struct AuditDispatcher {
    pub database: Database,
    pub sink_name: String,
    pub sink: Arc<dyn Sink>,
    pub identity: Identity,
    pub config: MeteringConfig,
    pub owner: String,
}

impl AuditDispatcher {
    pub async fn run(self) {
        let log = AuditLog::new(self.database.clone());
        let poll = Duration::from_millis(self.config.poll_interval_ms.max(10));
        let batch_size = self.config.batch_size.max(1);
        let mut failures: u32 = 0;
        loop {
            let pause = match self.turn(&log, batch_size).await {
                Ok(delivered) if delivered == batch_size => Duration::ZERO,
                Ok(_) => {
                    failures = 0;
                    poll
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    let base = Duration::from_millis(self.config.retry_base_ms.max(10));
                    let backoff = base.saturating_mul(1 << failures.min(10));
                    let max = Duration::from_millis(self.config.retry_max_ms.max(10));
                    tracing::warn!(sink = %self.sink_name, %error, "audit event delivery failed; will retry");
                    backoff.min(max)
                }
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// Leases the cursor, delivers the rows after it, and moves it past
    /// those delivered. Returns how many were.
    async fn turn(&self, log: &AuditLog, batch_size: usize) -> anyhow::Result<usize> {
        let now = now_ms();
        let lease_until = now + self.config.lease_ms.max(1) as i64;
        let cursor: Option<i64> = {
            let _turn = self.database.write_turn().await;
            sqlx::query_scalar(
                "UPDATE audit_cursors SET lease_owner = $1, lease_until = $2, updated_at = $3 \
                 WHERE sink = $4 AND (lease_owner = $1 OR lease_until IS NULL OR lease_until < $3) RETURNING seq",
            )
            .bind(&self.owner)
            .bind(lease_until)
            .bind(now)
            .bind(&self.sink_name)
            .fetch_optional(&self.database.pool)
            .await?
        };
        // Another gateway delivers this sink's audit events.
        let Some(cursor) = cursor else { return Ok(0) };
        let rows = log.after(cursor, batch_size).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let events = rows
            .iter()
            .map(|record| {
                Ok(StoredEvent {
                    id: record.hash.clone(),
                    json: audit_event_json(&self.identity, record)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let delivery = self.sink.deliver(&events).await;
        let delivered = delivery.delivered.min(rows.len());
        if delivered > 0 {
            let _turn = self.database.write_turn().await;
            sqlx::query("UPDATE audit_cursors SET seq = $1, updated_at = $2 WHERE sink = $3 AND lease_owner = $4")
                .bind(rows[delivered - 1].seq)
                .bind(now_ms())
                .bind(&self.sink_name)
                .bind(&self.owner)
                .execute(&self.database.pool)
                .await?;
        }
        match delivery.error {
            Some(error) => anyhow::bail!("{error}"),
            None => Ok(delivered),
        }
    }
}
