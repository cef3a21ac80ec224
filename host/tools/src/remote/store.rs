//! The records of remote MCP servers: the only code that issues SQL against
//! `mcp_servers`. A record keeps the header a static credential goes in
//! readable and its value sealed; opening it is the caller's job.

use sqlx::Row;
use tollgate_core::db::{Database, now_ms};

/// One remote server, as stored.
#[derive(Clone, Debug)]
pub struct ServerRecord {
    pub workspace_id: String,
    pub name: String,
    pub url: String,
    /// `streamable-http`, the only transport served today.
    pub transport: String,
    /// The header a static credential goes in; `None`: no auth.
    pub auth_header: Option<String>,
    /// The credential's value (or OAuth client secret), sealed for this
    /// workspace and name; empty when none.
    pub sealed_auth: String,
    /// OAuth client credentials' public half (a JSON column); `None`: the
    /// credential is a static header's value.
    pub oauth: Option<super::OAuthClient>,
    pub created_at_ms: i64,
}

pub struct ServerStore {
    database: Database,
}

impl ServerStore {
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Stores a new record; `false` when the workspace already has one of that name.
    pub async fn create(&self, record: &ServerRecord) -> anyhow::Result<bool> {
        let mut tx = self.database.begin_write().await?;
        let taken = sqlx::query("SELECT name FROM mcp_servers WHERE workspace_id = $1 AND name = $2")
            .bind(&record.workspace_id)
            .bind(&record.name)
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO mcp_servers (workspace_id, name, url, transport, auth_header, sealed_auth, oauth, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&record.workspace_id)
        .bind(&record.name)
        .bind(&record.url)
        .bind(&record.transport)
        .bind(&record.auth_header)
        .bind(&record.sealed_auth)
        .bind(record.oauth.as_ref().map(|client| serde_json::to_string(client).expect("serializes")))
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The workspace's servers, by name.
    pub async fn in_workspace(&self, workspace_id: &str) -> anyhow::Result<Vec<ServerRecord>> {
        let rows = sqlx::query(
            "SELECT workspace_id, name, url, transport, auth_header, sealed_auth, oauth, created_at_ms \
             FROM mcp_servers WHERE workspace_id = $1 ORDER BY name",
        )
        .bind(workspace_id)
        .fetch_all(&self.database.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(ServerRecord {
                    workspace_id: row.try_get("workspace_id")?,
                    name: row.try_get("name")?,
                    url: row.try_get("url")?,
                    transport: row.try_get("transport")?,
                    auth_header: row.try_get("auth_header")?,
                    sealed_auth: row.try_get("sealed_auth")?,
                    oauth: match row.try_get::<Option<String>, _>("oauth")? {
                        Some(text) => Some(serde_json::from_str(&text)?),
                        None => None,
                    },
                    created_at_ms: row.try_get("created_at_ms")?,
                })
            })
            .collect()
    }

    /// Removes one; `false` when there was none.
    pub async fn delete(&self, workspace_id: &str, name: &str) -> anyhow::Result<bool> {
        let deleted = sqlx::query("DELETE FROM mcp_servers WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .execute(&self.database.pool)
            .await?;
        Ok(deleted.rows_affected() == 1)
    }
}
