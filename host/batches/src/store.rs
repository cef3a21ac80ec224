//! The `files`, `batches` and `batch_results` tables.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use tollgate_core::db::{Database, now_ms};
use tollgate_identity::auth::permissions::Role;
use tollgate_identity::auth::{KeyScope, Principal};

/// The moves of a batch's life: `in_progress` → `finalizing` →
/// `completed`; `in_progress` → `cancelling` → `cancelled`; past its window,
/// `expired`.
#[derive(Clone, Copy, Debug)]
pub enum Transition {
    Cancel,
    Finalize,
    Complete,
    Cancelled,
    Expire,
    /// The key it runs as was revoked.
    Fail,
}

/// A stored file's row.
#[derive(Clone, Debug)]
pub struct FileRow {
    pub id: String,
    pub workspace_id: String,
    pub purpose: String,
    pub filename: String,
    pub bytes: i64,
    pub digest: String,
    pub created_at_ms: i64,
}

/// A batch's row.
#[derive(Clone, Debug)]
pub struct BatchRow {
    pub id: String,
    pub workspace_id: String,
    pub principal: String,
    pub endpoint: String,
    pub input_file_id: String,
    pub completion_window: String,
    pub metadata: Option<String>,
    pub status: String,
    pub total: i64,
    pub output_file_id: Option<String>,
    pub error_file_id: Option<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub in_progress_at_ms: Option<i64>,
    pub finalizing_at_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
    pub expired_at_ms: Option<i64>,
    pub cancelling_at_ms: Option<i64>,
    pub cancelled_at_ms: Option<i64>,
    pub failed_at_ms: Option<i64>,
    pub errors: Option<String>,
}

/// The caller a batch runs as, kept with it so a resumed batch still runs as
/// its creator.
#[derive(Serialize, Deserialize)]
pub struct StoredPrincipal {
    key_id: String,
    workspace_id: String,
    user_id: Option<String>,
    role: Role,
    scope: KeyScope,
    requests_per_minute: Option<u32>,
    /// Its tool lists (key, role); absent in batches stored before them.
    #[serde(default)]
    tools_key: Option<Vec<String>>,
    #[serde(default)]
    tools_role: Option<Vec<String>>,
}

impl StoredPrincipal {
    pub fn of(principal: &Principal) -> String {
        serde_json::to_string(&StoredPrincipal {
            key_id: principal.key_id.clone(),
            workspace_id: principal.workspace_id.clone(),
            user_id: principal.user_id.clone(),
            role: principal.role,
            scope: principal.scope,
            requests_per_minute: principal.requests_per_minute,
            tools_key: principal.tools.key.clone(),
            tools_role: principal.tools.role.clone(),
        })
        .expect("a principal serializes")
    }

    pub fn read(text: &str) -> anyhow::Result<Principal> {
        let stored: StoredPrincipal = serde_json::from_str(text)?;
        Ok(Principal {
            key_id: stored.key_id,
            workspace_id: stored.workspace_id,
            user_id: stored.user_id,
            role: stored.role,
            scope: stored.scope,
            requests_per_minute: stored.requests_per_minute,
            console_session: None,
            tools: tollgate_identity::auth::ToolPolicy {
                key: stored.tools_key,
                role: stored.tools_role,
            },
        })
    }
}

pub struct Store {
    database: Database,
}

/// The `batches` columns a [`BatchRow`] reads, as a literal (sqlx takes
/// only literal SQL).
macro_rules! batch_columns {
    () => {
        "id, workspace_id, principal, endpoint, input_file_id, completion_window, metadata, status, total, \
         output_file_id, error_file_id, created_at_ms, expires_at_ms, in_progress_at_ms, finalizing_at_ms, \
         completed_at_ms, expired_at_ms, cancelling_at_ms, cancelled_at_ms, failed_at_ms, errors"
    };
}

fn batch(row: &sqlx::any::AnyRow) -> sqlx::Result<BatchRow> {
    Ok(BatchRow {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        principal: row.try_get("principal")?,
        endpoint: row.try_get("endpoint")?,
        input_file_id: row.try_get("input_file_id")?,
        completion_window: row.try_get("completion_window")?,
        metadata: row.try_get("metadata")?,
        status: row.try_get("status")?,
        total: row.try_get("total")?,
        output_file_id: row.try_get("output_file_id")?,
        error_file_id: row.try_get("error_file_id")?,
        created_at_ms: row.try_get("created_at_ms")?,
        expires_at_ms: row.try_get("expires_at_ms")?,
        in_progress_at_ms: row.try_get("in_progress_at_ms")?,
        finalizing_at_ms: row.try_get("finalizing_at_ms")?,
        completed_at_ms: row.try_get("completed_at_ms")?,
        expired_at_ms: row.try_get("expired_at_ms")?,
        cancelling_at_ms: row.try_get("cancelling_at_ms")?,
        cancelled_at_ms: row.try_get("cancelled_at_ms")?,
        failed_at_ms: row.try_get("failed_at_ms")?,
        errors: row.try_get("errors")?,
    })
}

fn file(row: &sqlx::any::AnyRow) -> sqlx::Result<FileRow> {
    Ok(FileRow {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        purpose: row.try_get("purpose")?,
        filename: row.try_get("filename")?,
        bytes: row.try_get("bytes")?,
        digest: row.try_get("digest")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

impl Store {
    pub fn new(database: Database) -> Self {
        Store { database }
    }

    fn pool(&self) -> &sqlx::AnyPool {
        &self.database.pool
    }

    pub async fn insert_file(&self, file: &FileRow) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO files (id, workspace_id, purpose, filename, bytes, digest, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&file.id)
        .bind(&file.workspace_id)
        .bind(&file.purpose)
        .bind(&file.filename)
        .bind(file.bytes)
        .bind(&file.digest)
        .bind(file.created_at_ms)
        .execute(self.pool())
        .await
        .map(drop)
    }

    /// The workspace's file, unless deleted.
    pub async fn file(&self, workspace_id: &str, id: &str) -> sqlx::Result<Option<FileRow>> {
        sqlx::query(
            "SELECT id, workspace_id, purpose, filename, bytes, digest, created_at_ms FROM files \
             WHERE id = $1 AND workspace_id = $2 AND deleted_at_ms IS NULL",
        )
        .bind(id)
        .bind(workspace_id)
        .fetch_optional(self.pool())
        .await?
        .as_ref()
        .map(file)
        .transpose()
    }

    pub async fn files(&self, workspace_id: &str, limit: i64) -> sqlx::Result<Vec<FileRow>> {
        sqlx::query(
            "SELECT id, workspace_id, purpose, filename, bytes, digest, created_at_ms FROM files \
             WHERE workspace_id = $1 AND deleted_at_ms IS NULL ORDER BY created_at_ms DESC, id DESC LIMIT $2",
        )
        .bind(workspace_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(file)
        .collect()
    }

    pub async fn delete_file(&self, workspace_id: &str, id: &str) -> sqlx::Result<bool> {
        let done = sqlx::query(
            "UPDATE files SET deleted_at_ms = $1 WHERE id = $2 AND workspace_id = $3 AND deleted_at_ms IS NULL",
        )
        .bind(now_ms())
        .bind(id)
        .bind(workspace_id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn insert_batch(&self, batch: &BatchRow) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO batches (id, workspace_id, principal, endpoint, input_file_id, completion_window, metadata, \
             status, total, created_at_ms, expires_at_ms, in_progress_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&batch.id)
        .bind(&batch.workspace_id)
        .bind(&batch.principal)
        .bind(&batch.endpoint)
        .bind(&batch.input_file_id)
        .bind(&batch.completion_window)
        .bind(&batch.metadata)
        .bind(&batch.status)
        .bind(batch.total)
        .bind(batch.created_at_ms)
        .bind(batch.expires_at_ms)
        .bind(batch.in_progress_at_ms)
        .execute(self.pool())
        .await
        .map(drop)
    }

    /// The batch, in the workspace (`None`: any workspace, for the runner).
    pub async fn batch(&self, workspace_id: Option<&str>, id: &str) -> sqlx::Result<Option<BatchRow>> {
        let row = sqlx::query(concat!("SELECT ", batch_columns!(), " FROM batches WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        let found = row.as_ref().map(batch).transpose()?;
        Ok(found.filter(|b| workspace_id.is_none_or(|w| w == b.workspace_id)))
    }

    pub async fn batches(&self, workspace_id: &str, limit: i64) -> sqlx::Result<Vec<BatchRow>> {
        sqlx::query(concat!(
            "SELECT ",
            batch_columns!(),
            " FROM batches WHERE workspace_id = $1 ORDER BY created_at_ms DESC, id DESC LIMIT $2"
        ))
        .bind(workspace_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(batch)
        .collect()
    }

    /// The workspace's batches still running (or stopping).
    pub async fn running(&self, workspace_id: &str) -> sqlx::Result<i64> {
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM batches WHERE workspace_id = $1 AND status IN ('in_progress', 'cancelling')",
        )
        .bind(workspace_id)
        .fetch_one(self.pool())
        .await
    }

    /// Claims the batch for `lease_ms` if no one holds it (or this claim
    /// renews); false when another gateway holds it or it is done.
    pub async fn claim(&self, id: &str, lease_ms: u64, renew_from: Option<i64>) -> sqlx::Result<Option<i64>> {
        let now = now_ms();
        let until = now + lease_ms as i64;
        let done = match renew_from {
            Some(held) => {
                sqlx::query("UPDATE batches SET lease_until_ms = $1 WHERE id = $2 AND lease_until_ms = $3")
                    .bind(until)
                    .bind(id)
                    .bind(held)
                    .execute(self.pool())
                    .await?
            }
            None => {
                sqlx::query(
                    "UPDATE batches SET lease_until_ms = $1 WHERE id = $2 AND lease_until_ms < $3 \
                     AND status IN ('in_progress', 'cancelling')",
                )
                .bind(until)
                .bind(id)
                .bind(now)
                .execute(self.pool())
                .await?
            }
        };
        Ok((done.rows_affected() == 1).then_some(until))
    }

    /// Running batches nobody holds.
    pub async fn lapsed(&self) -> sqlx::Result<Vec<String>> {
        sqlx::query_scalar(
            "SELECT id FROM batches WHERE status IN ('in_progress', 'cancelling') AND lease_until_ms < $1",
        )
        .bind(now_ms())
        .fetch_all(self.pool())
        .await
    }

    /// The lines that have a result.
    pub async fn done_lines(&self, id: &str) -> sqlx::Result<Vec<i64>> {
        sqlx::query_scalar("SELECT line FROM batch_results WHERE batch_id = $1")
            .bind(id)
            .fetch_all(self.pool())
            .await
    }

    pub async fn record(&self, id: &str, line: i64, ok: bool, result: &str) -> sqlx::Result<()> {
        sqlx::query("INSERT INTO batch_results (batch_id, line, ok, result) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(line)
            .bind(i64::from(ok))
            .bind(result)
            .execute(self.pool())
            .await
            .map(drop)
    }

    /// The results in line order: (ok, JSONL line).
    pub async fn results(&self, id: &str) -> sqlx::Result<Vec<(bool, String)>> {
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT ok, result FROM batch_results WHERE batch_id = $1 ORDER BY line")
                .bind(id)
                .fetch_all(self.pool())
                .await?;
        Ok(rows.into_iter().map(|(ok, result)| (ok != 0, result)).collect())
    }

    /// (completed, failed) so far.
    pub async fn counts(&self, id: &str) -> sqlx::Result<(i64, i64)> {
        let rows: Vec<(i64, i64)> =
            sqlx::query_as("SELECT ok, COUNT(*) FROM batch_results WHERE batch_id = $1 GROUP BY ok")
                .bind(id)
                .fetch_all(self.pool())
                .await?;
        let count = |ok: i64| rows.iter().find(|(k, _)| *k == ok).map_or(0, |(_, n)| *n);
        Ok((count(1), count(0)))
    }

    /// Moves the batch along its life; false when it was not in a state
    /// the move starts from.
    pub async fn transition(&self, id: &str, to: Transition) -> sqlx::Result<bool> {
        let sql = match to {
            Transition::Cancel => {
                "UPDATE batches SET status = 'cancelling', cancelling_at_ms = $1 WHERE id = $2 AND status = 'in_progress'"
            }
            Transition::Finalize => {
                "UPDATE batches SET status = 'finalizing', finalizing_at_ms = $1 WHERE id = $2 AND status = 'in_progress'"
            }
            Transition::Complete => {
                "UPDATE batches SET status = 'completed', completed_at_ms = $1 WHERE id = $2 AND status = 'finalizing'"
            }
            Transition::Cancelled => {
                "UPDATE batches SET status = 'cancelled', cancelled_at_ms = $1 WHERE id = $2 AND status = 'cancelling'"
            }
            Transition::Expire => {
                "UPDATE batches SET status = 'expired', expired_at_ms = $1 WHERE id = $2 \
                 AND status IN ('in_progress', 'finalizing')"
            }
            Transition::Fail => {
                "UPDATE batches SET status = 'failed', failed_at_ms = $1 WHERE id = $2 \
                 AND status IN ('in_progress', 'cancelling')"
            }
        };
        let done = sqlx::query(sql).bind(now_ms()).bind(id).execute(self.pool()).await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records why the batch failed (OpenAI's `errors` object).
    pub async fn set_errors(&self, id: &str, errors: &str) -> sqlx::Result<()> {
        sqlx::query("UPDATE batches SET errors = $1 WHERE id = $2")
            .bind(errors)
            .bind(id)
            .execute(self.pool())
            .await
            .map(drop)
    }

    pub async fn set_outputs(&self, id: &str, output: Option<&str>, errors: Option<&str>) -> sqlx::Result<()> {
        sqlx::query("UPDATE batches SET output_file_id = $1, error_file_id = $2, lease_until_ms = 0 WHERE id = $3")
            .bind(output)
            .bind(errors)
            .bind(id)
            .execute(self.pool())
            .await
            .map(drop)
    }
}
