//! The upload quota: bytes of blobs each owner (a workspace) has uploaded,
//! counted once per (owner, digest), in the index's database (tables in the
//! host's migration 0007). Blob storage is shared by digest, so this counts
//! what an owner sent rather than what it alone occupies; a blob counts whether
//! or not a version using it is ever published, since storage holds it either way.

use crate::Digest;
use crate::index::Index;

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error(
        "this upload of {size} bytes would exceed the upload quota of {quota} bytes ({used} bytes already uploaded)"
    )]
    Exceeded { used: u64, quota: u64, size: u64 },
    #[error("registry index: {0}")]
    Database(#[from] sqlx::Error),
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Index {
    /// Counts `size` bytes of `digest` against `owner`'s `quota` (0: no
    /// quota, only counted) before the blob is stored. `Ok(false)`: `owner`
    /// already uploaded it, nothing new is counted. `Ok(true)`: counted now;
    /// if storing then fails, undo with [`Index::release_upload`].
    ///
    /// The total is one row changed by a conditional `UPDATE`, so concurrent
    /// uploads, on any gateway sharing the database, cannot pass the quota
    /// together.
    pub async fn reserve_upload(
        &self,
        owner: &str,
        digest: &Digest,
        size: u64,
        quota: u64,
    ) -> Result<bool, QuotaError> {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let quota = i64::try_from(quota).unwrap_or(i64::MAX);
        let mut tx = self.begin_write().await?;
        let recorded = sqlx::query(
            "INSERT INTO registry_blob_uploads (workspace_id, digest, size, uploaded_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT DO NOTHING",
        )
        .bind(owner)
        .bind(digest.to_string())
        .bind(size)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        if recorded.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query("INSERT INTO registry_blob_usage (workspace_id, bytes) VALUES ($1, 0) ON CONFLICT DO NOTHING")
            .bind(owner)
            .execute(&mut *tx)
            .await?;
        let counted = sqlx::query(
            "UPDATE registry_blob_usage SET bytes = bytes + $2 WHERE workspace_id = $1 AND ($3 = 0 OR bytes + $2 <= $3)",
        )
        .bind(owner)
        .bind(size)
        .bind(quota)
        .execute(&mut *tx)
        .await?;
        if counted.rows_affected() == 0 {
            let used: i64 = sqlx::query_scalar("SELECT bytes FROM registry_blob_usage WHERE workspace_id = $1")
                .bind(owner)
                .fetch_one(&mut *tx)
                .await?;
            return Err(QuotaError::Exceeded {
                used: used.max(0) as u64,
                quota: quota as u64,
                size: size as u64,
            });
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Undoes a [`Index::reserve_upload`] that returned `Ok(true)` whose blob
    /// was then not stored.
    pub async fn release_upload(&self, owner: &str, digest: &Digest) -> Result<(), sqlx::Error> {
        let mut tx = self.begin_write().await?;
        let size: Option<i64> =
            sqlx::query_scalar("SELECT size FROM registry_blob_uploads WHERE workspace_id = $1 AND digest = $2")
                .bind(owner)
                .bind(digest.to_string())
                .fetch_optional(&mut *tx)
                .await?;
        let Some(size) = size else {
            return Ok(());
        };
        sqlx::query("DELETE FROM registry_blob_uploads WHERE workspace_id = $1 AND digest = $2")
            .bind(owner)
            .bind(digest.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE registry_blob_usage SET bytes = bytes - $2 WHERE workspace_id = $1")
            .bind(owner)
            .bind(size)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    /// Bytes `owner` has uploaded (each blob once).
    pub async fn uploaded_bytes(&self, owner: &str) -> Result<u64, sqlx::Error> {
        let used: Option<i64> = sqlx::query_scalar("SELECT bytes FROM registry_blob_usage WHERE workspace_id = $1")
            .bind(owner)
            .fetch_optional(&self.pool)
            .await?;
        Ok(used.unwrap_or(0).max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn index(dir: &std::path::Path) -> Index {
        sqlx::any::install_default_drivers();
        let url = format!("sqlite://{}?mode=rwc", dir.join("index.db").display());
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        sqlx::migrate!("../host/core/migrations/sqlite")
            .run(&pool)
            .await
            .unwrap();
        Index::new(pool)
    }

    #[tokio::test]
    async fn uploads_count_once_per_owner_and_stop_at_the_quota() {
        let dir = tempfile::tempdir().unwrap();
        let index = index(dir.path()).await;
        let a = Digest::of(b"a");
        let b = Digest::of(b"b");
        let c = Digest::of(b"c");
        assert!(index.reserve_upload("ws_1", &a, 60, 100).await.unwrap());
        assert!(
            !index.reserve_upload("ws_1", &a, 60, 100).await.unwrap(),
            "the same blob again is free"
        );
        match index.reserve_upload("ws_1", &b, 41, 100).await {
            Err(QuotaError::Exceeded { used, quota, size }) => assert_eq!((used, quota, size), (60, 100, 41)),
            other => panic!("expected the quota to refuse it: {other:?}"),
        }
        assert_eq!(
            index.uploaded_bytes("ws_1").await.unwrap(),
            60,
            "a refused upload counts nothing"
        );
        assert!(
            index.reserve_upload("ws_1", &b, 40, 100).await.unwrap(),
            "exactly up to the quota"
        );
        assert!(
            index.reserve_upload("ws_2", &a, 60, 100).await.unwrap(),
            "another owner has its own quota"
        );
        // A store that failed gives the bytes back.
        index.release_upload("ws_1", &b).await.unwrap();
        assert_eq!(index.uploaded_bytes("ws_1").await.unwrap(), 60);
        assert!(index.reserve_upload("ws_1", &c, 40, 100).await.unwrap());
        // No quota: counted, never refused.
        assert!(index.reserve_upload("ws_3", &c, u64::MAX / 4, 0).await.unwrap());
    }
}
