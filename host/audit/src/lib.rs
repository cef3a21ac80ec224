//! The admin audit log: every control-plane change (an op, a sign-in, a
//! payment, an operator's command) as one append-only row in a hash chain.
//!
//! Each row's hash covers its content and the previous row's hash, and the
//! chain's head is kept beside it, so changing, removing or inserting any
//! row (or dropping the newest) breaks [`AuditLog::verify`]. Retention moves
//! old rows to the archive and keeps the last archived row's hash as the
//! chain's anchor: verification starts there, so archiving never breaks
//! the chain. Values are redacted here ([`redact::for_audit`]) whoever
//! builds them, so no secret reaches a row.
//!
//! A change is recorded after it commits, by its own transaction: a crash
//! between the two loses that row (and is logged nowhere else); a failed
//! append is logged as an error and never fails the change. See
//! docs/audit.md.
#![forbid(unsafe_code)]

mod record;
pub mod redact;

use serde_json::Value;
use sqlx::Row;

pub use record::{Actor, ActorKind, Change, Failure, GENESIS, Record};
use tollgate_core::db::{Backend, Database, now_ms};

/// The log, on the gateway's database.
#[derive(Clone)]
pub struct AuditLog {
    database: Database,
}

/// What `audit.list` filters on. The workspace is required: a tenant sees
/// only its own changes.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub workspace_id: String,
    pub op: Option<String>,
    /// A user id, key id or session id.
    pub actor: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// Rows older than this `seq` (the page cursor).
    pub before_seq: Option<i64>,
    pub limit: usize,
}

/// Where the chain is, and the first place it breaks, if any.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Verification {
    /// Rows checked (those after the anchor).
    pub rows: u64,
    pub anchor_seq: i64,
    pub head_seq: i64,
    pub head_hash: String,
    pub broken: Option<Break>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Break {
    pub seq: i64,
    pub reason: String,
}

const COLUMNS: &str =
    "seq, at_ms, workspace_id, actor, ip, op, target, params, before, after, outcome, error, prev_hash, hash";

/// Rows read per query while verifying or exporting.
const PAGE: usize = 1000;

impl AuditLog {
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Appends `change` to the chain; returns the stored row.
    pub async fn append(&self, change: Change) -> anyhow::Result<Record> {
        let keep = |value: Option<Value>| value.map(|v| redact::for_audit(&v));
        let mut record = Record {
            seq: 0,
            at_ms: now_ms(),
            workspace_id: change.workspace_id,
            actor: change.actor,
            ip: change.ip,
            op: change.op,
            target: keep(change.target),
            params: keep(change.params),
            before: keep(change.before),
            after: keep(change.after),
            outcome: if change.failure.is_some() { "error" } else { "ok" }.into(),
            error: change.failure,
            prev_hash: String::new(),
            hash: String::new(),
        };
        let _turn = self.database.write_turn().await;
        let mut tx = self.database.begin_write().await?;
        let head = match self.database.backend {
            Backend::Sqlite => "SELECT head_seq, head_hash FROM audit_chain WHERE id = 1",
            Backend::Postgres => "SELECT head_seq, head_hash FROM audit_chain WHERE id = 1 FOR UPDATE",
        };
        let (head_seq, head_hash): (i64, String) = sqlx::query_as(head).fetch_one(&mut *tx).await?;
        record.seq = head_seq + 1;
        record.prev_hash = head_hash;
        record.hash = record.expected_hash();
        let text = |value: &Option<Value>| value.as_ref().map(Value::to_string);
        sqlx::query(
            "INSERT INTO audit_log (seq, at_ms, workspace_id, actor, actor_user_id, actor_key, ip, op, target, \
             params, before, after, outcome, error, prev_hash, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
        .bind(record.seq)
        .bind(record.at_ms)
        .bind(record.workspace_id.clone())
        .bind(serde_json::to_string(&record.actor)?)
        .bind(record.actor.user_id.clone())
        .bind(record.actor.credential().map(str::to_string))
        .bind(record.ip.clone())
        .bind(record.op.clone())
        .bind(text(&record.target))
        .bind(text(&record.params))
        .bind(text(&record.before))
        .bind(text(&record.after))
        .bind(record.outcome.clone())
        .bind(record.error.as_ref().map(serde_json::to_string).transpose()?)
        .bind(record.prev_hash.clone())
        .bind(record.hash.clone())
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE audit_chain SET head_seq = $1, head_hash = $2 WHERE id = 1")
            .bind(record.seq)
            .bind(record.hash.clone())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(record)
    }

    /// [`Self::append`], logging instead of failing: the change it records
    /// has already happened and must not be reported as failed.
    pub async fn record(&self, change: Change) {
        let op = change.op.clone();
        if let Err(error) = self.append(change).await {
            tracing::error!(%op, error = %format!("{error:#}"), "could not write an audit row");
        }
    }

    /// A workspace's rows, newest first.
    pub async fn list(&self, filter: &Filter) -> anyhow::Result<Vec<Record>> {
        let mut sql = format!("SELECT {COLUMNS} FROM audit_log WHERE workspace_id = $1");
        let mut binds: Vec<Bind> = vec![Bind::Text(filter.workspace_id.clone())];
        let mut condition = |clause: &str, value: Bind| {
            binds.push(value);
            sql.push_str(&clause.replace('?', &format!("${}", binds.len())));
        };
        if let Some(op) = &filter.op {
            condition(" AND op = ?", Bind::Text(op.clone()));
        }
        if let Some(actor) = &filter.actor {
            condition(" AND (actor_user_id = ?", Bind::Text(actor.clone()));
            condition(" OR actor_key = ?)", Bind::Text(actor.clone()));
        }
        if let Some(since) = filter.since_ms {
            condition(" AND at_ms >= ?", Bind::Int(since));
        }
        if let Some(until) = filter.until_ms {
            condition(" AND at_ms < ?", Bind::Int(until));
        }
        if let Some(before) = filter.before_seq {
            condition(" AND seq < ?", Bind::Int(before));
        }
        condition(" ORDER BY seq DESC LIMIT ?", Bind::Int(filter.limit as i64));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for bind in binds {
            query = match bind {
                Bind::Text(text) => query.bind(text),
                Bind::Int(number) => query.bind(number),
            };
        }
        let rows = query.fetch_all(&self.database.pool).await?;
        rows.iter().map(decode).collect()
    }

    /// Rows after `seq` in chain order, at most `limit` (the export feed).
    pub async fn after(&self, seq: i64, limit: usize) -> anyhow::Result<Vec<Record>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2"
        )))
        .bind(seq)
        .bind(limit as i64)
        .fetch_all(&self.database.pool)
        .await?;
        rows.iter().map(decode).collect()
    }

    /// Walks the chain from its anchor to its head.
    pub async fn verify(&self) -> anyhow::Result<Verification> {
        let (head_seq, head_hash, anchor_seq, anchor_hash): (i64, String, i64, String) =
            sqlx::query_as("SELECT head_seq, head_hash, anchor_seq, anchor_hash FROM audit_chain WHERE id = 1")
                .fetch_one(&self.database.pool)
                .await?;
        let mut verification = Verification {
            rows: 0,
            anchor_seq,
            head_seq,
            head_hash: head_hash.clone(),
            broken: None,
        };
        let (mut seq, mut hash) = (anchor_seq, anchor_hash);
        let fail = |at: i64, reason: String| Some(Break { seq: at, reason });
        'pages: loop {
            let page = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {COLUMNS} FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2"
            )))
            .bind(seq)
            .bind(PAGE as i64)
            .fetch_all(&self.database.pool)
            .await?;
            let count = page.len();
            for row in &page {
                let record = match decode(row) {
                    Ok(record) => record,
                    Err(error) => {
                        let at: i64 = row.try_get("seq").unwrap_or(seq + 1);
                        verification.broken = fail(at, format!("the row does not parse: {error:#}"));
                        break 'pages;
                    }
                };
                let broken = if record.seq != seq + 1 {
                    Some(format!("row {} is missing", seq + 1))
                } else if record.prev_hash != hash {
                    Some("its prev_hash is not the previous row's hash".to_string())
                } else if record.hash != record.expected_hash() {
                    Some("its content does not match its hash".to_string())
                } else {
                    None
                };
                if let Some(reason) = broken {
                    verification.broken = fail(seq + 1, reason);
                    break 'pages;
                }
                (seq, hash) = (record.seq, record.hash);
                verification.rows += 1;
            }
            if count < PAGE {
                break;
            }
        }
        if verification.broken.is_none() && (seq, &hash) != (head_seq, &head_hash) {
            verification.broken = fail(
                seq + 1,
                format!("the chain ends at row {seq} but its head says row {head_seq}"),
            );
        }
        Ok(verification)
    }

    /// The oldest rows after the anchor that were appended before
    /// `before_ms`, up to `through_seq`, in chain order; at most `limit`.
    /// Retention archives these, then calls [`Self::forget_through`].
    pub async fn archivable(&self, before_ms: i64, through_seq: i64, limit: usize) -> anyhow::Result<Vec<Record>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM audit_log WHERE seq > (SELECT anchor_seq FROM audit_chain WHERE id = 1) \
             AND seq <= $1 ORDER BY seq LIMIT $2"
        )))
        .bind(through_seq)
        .bind(limit as i64)
        .fetch_all(&self.database.pool)
        .await?;
        // Stop at the first row past the cutoff, so what is archived is one
        // contiguous stretch of the chain.
        let mut records = Vec::with_capacity(rows.len());
        for row in &rows {
            let record = decode(row)?;
            if record.at_ms >= before_ms {
                break;
            }
            records.push(record);
        }
        Ok(records)
    }

    /// Deletes the rows up to `last` (which must have been archived) and
    /// makes `last` the chain's anchor. Returns the rows deleted.
    pub async fn forget_through(&self, last: &Record) -> anyhow::Result<u64> {
        let _turn = self.database.write_turn().await;
        let mut tx = self.database.begin_write().await?;
        let moved =
            sqlx::query("UPDATE audit_chain SET anchor_seq = $1, anchor_hash = $2 WHERE id = 1 AND anchor_seq < $1")
                .bind(last.seq)
                .bind(last.hash.clone())
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if moved == 0 {
            // Another gateway archived these first.
            return Ok(0);
        }
        let deleted = sqlx::query("DELETE FROM audit_log WHERE seq <= $1")
            .bind(last.seq)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted)
    }
}

enum Bind {
    Text(String),
    Int(i64),
}

fn decode(row: &sqlx::any::AnyRow) -> anyhow::Result<Record> {
    let json = |column: &str| -> anyhow::Result<Option<Value>> {
        let text: Option<String> = row.try_get(column)?;
        Ok(text.map(|text| serde_json::from_str(&text)).transpose()?)
    };
    let actor: String = row.try_get("actor")?;
    let error: Option<String> = row.try_get("error")?;
    Ok(Record {
        seq: row.try_get("seq")?,
        at_ms: row.try_get("at_ms")?,
        workspace_id: row.try_get("workspace_id")?,
        actor: serde_json::from_str(&actor)?,
        ip: row.try_get("ip")?,
        op: row.try_get("op")?,
        target: json("target")?,
        params: json("params")?,
        before: json("before")?,
        after: json("after")?,
        outcome: row.try_get("outcome")?,
        error: error.map(|e| serde_json::from_str(&e)).transpose()?,
        prev_hash: row.try_get("prev_hash")?,
        hash: row.try_get("hash")?,
    })
}

#[cfg(test)]
mod tests;
