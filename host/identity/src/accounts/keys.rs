//! A workspace's API keys: mint, list (hint and metadata, never the secret),
//! revoke. A revocation reaches every gateway's key cache when it commits.

use schemars::JsonSchema;
use serde::Serialize;

use super::{AccountError, Accounts, KeyOptions, insert_key};
use crate::auth::{KeyChange, KeyScope};
use tollgate_core::db::now_unix;

#[derive(Serialize, JsonSchema)]
pub struct KeyInfo {
    pub key_id: String,
    pub name: String,
    pub hint: String,
    pub user_id: Option<String>,
    pub scope: KeyScope,
    pub requests_per_minute: Option<u32>,
    /// The installs and tools it may reach over MCP; `null`: what its role may.
    pub tools: Option<Vec<String>>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// A key just minted. `secret` is shown once; only its hash is stored.
pub struct MintedKey {
    pub key_id: String,
    pub hint: String,
    pub secret: String,
}

impl Accounts {
    pub async fn create_key(
        &self,
        workspace_id: &str,
        user_id: Option<&str>,
        name: &str,
        options: &KeyOptions,
    ) -> Result<MintedKey, AccountError> {
        let mut tx = self.database.begin_write().await?;
        let (key_id, key) = insert_key(&mut tx, workspace_id, user_id, name, options).await?;
        tx.commit().await?;
        Ok(MintedKey {
            key_id,
            hint: key.hint,
            secret: key.secret,
        })
    }

    pub async fn keys(&self, workspace_id: &str) -> sqlx::Result<Vec<KeyInfo>> {
        type Row = (
            String,
            String,
            String,
            Option<String>,
            String,
            Option<i64>,
            Option<String>,
            i64,
            Option<i64>,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, name, hint, user_id, scope, requests_per_minute, tools, created_at, revoked_at FROM api_keys \
             WHERE workspace_id = $1 ORDER BY id",
        )
        .bind(workspace_id)
        .fetch_all(&self.database.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(key_id, name, hint, user_id, scope, requests_per_minute, tools, created_at, revoked_at)| KeyInfo {
                    key_id,
                    name,
                    hint,
                    user_id,
                    scope: KeyScope::parse(&scope).unwrap_or(KeyScope::Workspace),
                    requests_per_minute: requests_per_minute.and_then(|n| u32::try_from(n).ok()),
                    tools: crate::auth::tool_policy::from_column(tools),
                    created_at,
                    revoked_at,
                },
            )
            .collect())
    }

    /// Whether the workspace's key `key_id` exists and is not revoked (for
    /// work that outlives a request: a batch runs as its creator's key).
    pub async fn key_active(&self, workspace_id: &str, key_id: &str) -> sqlx::Result<bool> {
        let found: Option<String> =
            sqlx::query_scalar("SELECT id FROM api_keys WHERE id = $1 AND workspace_id = $2 AND revoked_at IS NULL")
                .bind(key_id)
                .bind(workspace_id)
                .fetch_optional(&self.database.pool)
                .await?;
        Ok(found.is_some())
    }

    /// Whose key `key_id` is: `None` when the workspace has no such key,
    /// `Some(None)` for a key made before users existed (it acts as the
    /// workspace's owner).
    pub async fn key_user(&self, workspace_id: &str, key_id: &str) -> sqlx::Result<Option<Option<String>>> {
        sqlx::query_scalar("SELECT user_id FROM api_keys WHERE id = $1 AND workspace_id = $2")
            .bind(key_id)
            .bind(workspace_id)
            .fetch_optional(&self.database.pool)
            .await
    }

    /// Replaces the key's own tool list (`None` removes it: the key may then
    /// reach what its role may). Returns false when the workspace has no
    /// such key or it is revoked. Like a revocation, the change reaches
    /// every gateway's key cache when it commits.
    pub async fn set_key_tools(
        &self,
        workspace_id: &str,
        key_id: &str,
        tools: Option<&[String]>,
    ) -> Result<bool, AccountError> {
        let hash: Option<Vec<u8>> = sqlx::query_scalar(
            "SELECT key_hash FROM api_keys WHERE id = $1 AND workspace_id = $2 AND revoked_at IS NULL",
        )
        .bind(key_id)
        .bind(workspace_id)
        .fetch_optional(&self.database.pool)
        .await?;
        let Some(hash) = hash else {
            return Ok(false);
        };
        let hash = <[u8; 32]>::try_from(hash.as_slice())
            .map_err(|_| anyhow::anyhow!("key '{key_id}' has a malformed hash"))?;
        let mut tx = self.database.begin_write().await?;
        sqlx::query("UPDATE api_keys SET tools = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(crate::auth::tool_policy::to_column(tools))
            .bind(key_id)
            .execute(&mut *tx)
            .await?;
        self.keys.commit_change(tx, KeyChange::key(&hash)).await?;
        Ok(true)
    }

    /// Revokes the key if it is not already; returns when it was revoked, or
    /// `None` if the workspace has no such key. The next data-plane request
    /// with it gets 401, on this gateway at once and on others sharing the
    /// database within about a second (see docs/control-plane.md).
    pub async fn revoke_key(&self, workspace_id: &str, key_id: &str) -> Result<Option<i64>, AccountError> {
        let row: Option<(Vec<u8>, Option<i64>)> =
            sqlx::query_as("SELECT key_hash, revoked_at FROM api_keys WHERE id = $1 AND workspace_id = $2")
                .bind(key_id)
                .bind(workspace_id)
                .fetch_optional(&self.database.pool)
                .await?;
        let Some((hash, revoked_at)) = row else {
            return Ok(None);
        };
        if revoked_at.is_some() {
            return Ok(revoked_at);
        }
        let hash = <[u8; 32]>::try_from(hash.as_slice())
            .map_err(|_| anyhow::anyhow!("key '{key_id}' has a malformed hash"))?;
        let now = now_unix();
        let mut tx = self.database.begin_write().await?;
        sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2")
            .bind(now)
            .bind(key_id)
            .execute(&mut *tx)
            .await?;
        self.keys.commit_change(tx, KeyChange::key(&hash)).await?;
        Ok(Some(now))
    }
}
