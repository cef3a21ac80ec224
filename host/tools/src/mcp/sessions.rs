//! MCP sessions (`Mcp-Session-Id`), the only code that issues SQL against
//! `mcp_sessions`. A session is made by `initialize` and ended by the
//! client's `DELETE`. It lives in the database, not in a gateway's memory,
//! so any gateway of a cluster serves it and a restart keeps it; it holds
//! what the client set for the session (the protocol revision it agreed,
//! whether it can answer elicitations, and its `logging/setLevel`). A session belongs to the workspace that opened
//! it: another workspace's key cannot use it.

use sqlx::Row;
use tollgate_core::db::{Database, now_ms};

/// How long a session lasts from `initialize`; a client whose session
/// expired gets 404 and initializes again, as the transport specifies.
pub const LIFETIME_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// MCP's log levels (RFC 5424's severities), least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// What a client gets before it sets a level: everything but debug.
const DEFAULT_LOG_LEVEL: &str = "info";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub protocol_version: String,
    /// One of [`LOG_LEVELS`]: the least severe level the client wants.
    pub log_level: String,
    /// The client declared the `elicitation` capability at `initialize`: a
    /// tool's call may ask its user for input.
    pub elicits: bool,
}

/// Longest elicitation capability kept (its JSON); a larger one is kept as
/// `{}`, which still says the client elicits.
const MAX_CAPABILITY: usize = 1024;

fn severity(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

pub struct Sessions {
    database: Database,
}

impl Sessions {
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// A new session for `workspace_id` at the agreed `protocol_version`.
    /// Sessions past their lifetime are dropped on the way, so the table
    /// holds about a week of initializations.
    /// `client_elicitation` is the `elicitation` capability the client
    /// declared, if it declared one.
    pub async fn open(
        &self,
        workspace_id: &str,
        protocol_version: &str,
        client_elicitation: Option<&serde_json::Value>,
    ) -> anyhow::Result<Session> {
        let now = now_ms();
        sqlx::query("DELETE FROM mcp_sessions WHERE created_at_ms < $1")
            .bind(now - LIFETIME_MS)
            .execute(&self.database.pool)
            .await?;
        let session = Session {
            id: tollgate_identity::auth::sessions::random_token(),
            protocol_version: protocol_version.to_string(),
            log_level: DEFAULT_LOG_LEVEL.to_string(),
            elicits: client_elicitation.is_some(),
        };
        let capability = client_elicitation.map(|capability| {
            let text = capability.to_string();
            match text.len() <= MAX_CAPABILITY {
                true => text,
                false => "{}".to_string(),
            }
        });
        sqlx::query(
            "INSERT INTO mcp_sessions (id, workspace_id, protocol_version, log_level, created_at_ms, client_elicitation) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&session.id)
        .bind(workspace_id)
        .bind(&session.protocol_version)
        .bind(&session.log_level)
        .bind(now)
        .bind(capability)
        .execute(&self.database.pool)
        .await?;
        Ok(session)
    }

    /// The live session `id` of `workspace_id`; `None` when there is no such
    /// session, it ended or expired, or it is another workspace's.
    pub async fn find(&self, workspace_id: &str, id: &str) -> anyhow::Result<Option<Session>> {
        let row = sqlx::query(
            "SELECT protocol_version, log_level, client_elicitation FROM mcp_sessions \
             WHERE id = $1 AND workspace_id = $2 AND ended_at_ms IS NULL AND created_at_ms >= $3",
        )
        .bind(id)
        .bind(workspace_id)
        .bind(now_ms() - LIFETIME_MS)
        .fetch_optional(&self.database.pool)
        .await?;
        row.map(|row| {
            Ok(Session {
                id: id.to_string(),
                protocol_version: row.try_get("protocol_version")?,
                log_level: row.try_get("log_level")?,
                elicits: row.try_get::<Option<String>, _>("client_elicitation")?.is_some(),
            })
        })
        .transpose()
    }

    /// Records the client's `logging/setLevel`; `level` is one of
    /// [`LOG_LEVELS`].
    pub async fn set_log_level(&self, session: &Session, level: &str) -> anyhow::Result<()> {
        debug_assert!(severity(level).is_some());
        sqlx::query("UPDATE mcp_sessions SET log_level = $1 WHERE id = $2")
            .bind(level)
            .bind(&session.id)
            .execute(&self.database.pool)
            .await?;
        Ok(())
    }

    /// Ends the session (the client's `DELETE`); `false` when `workspace_id`
    /// has no live session `id`.
    pub async fn end(&self, workspace_id: &str, id: &str) -> anyhow::Result<bool> {
        let ended = sqlx::query(
            "UPDATE mcp_sessions SET ended_at_ms = $1 WHERE id = $2 AND workspace_id = $3 AND ended_at_ms IS NULL",
        )
        .bind(now_ms())
        .bind(id)
        .bind(workspace_id)
        .execute(&self.database.pool)
        .await?;
        Ok(ended.rows_affected() == 1)
    }
}
