//! Workspace namespaces (the `namespaces` table): the names a workspace may
//! publish packages under. A workspace creates one here; its first publish
//! claims the name in the registry (`registry_namespaces`), so two workspaces
//! never publish under the same name.

use schemars::JsonSchema;
use serde::Serialize;

use tollgate_core::db::{Database, new_id, now_unix};

#[derive(Serialize, JsonSchema)]
pub struct Namespace {
    pub namespace_id: String,
    pub name: String,
    pub workspace_id: String,
    pub created_at: i64,
}

#[derive(Serialize, JsonSchema)]
pub struct NamespaceList {
    pub namespaces: Vec<Namespace>,
}

/// Why a namespace operation refused; callers decide on the variant.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("namespace '{0}': use 1 to 64 lowercase letters, digits and '-'")]
    InvalidName(String),
    #[error("namespace '{0}' already exists")]
    Exists(String),
    #[error(
        "this workspace has {count} namespaces, the most it may have \
         (control_plane.max_namespaces_per_workspace = {limit}); delete one first"
    )]
    LimitReached { count: i64, limit: u32 },
    #[error("namespace '{0}' belongs to another workspace")]
    Taken(String),
    /// Names what is missing (`namespace 'x'`).
    #[error("namespace '{0}' not found")]
    NotFound(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

fn check_name(name: &str) -> Result<(), NamespaceError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    match valid {
        true => Ok(()),
        false => Err(NamespaceError::InvalidName(name.to_string())),
    }
}

/// The namespaces API.
#[derive(Clone)]
pub struct Namespaces {
    database: Database,
}

impl Namespaces {
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Creates `name` in the workspace, which may have at most `limit`
    /// namespaces (0: no limit).
    pub async fn create(&self, workspace_id: &str, name: &str, limit: u32) -> Result<Namespace, NamespaceError> {
        check_name(name)?;
        let namespace = Namespace {
            namespace_id: new_id("ns"),
            name: name.to_string(),
            workspace_id: workspace_id.to_string(),
            created_at: now_unix(),
        };
        let mut tx = self.database.begin_write().await?;
        // Concurrent creates on any gateway cannot pass the limit together.
        tollgate_identity::accounts::lock_workspace(&mut tx, workspace_id).await?;
        let exists: Option<String> =
            sqlx::query_scalar("SELECT id FROM namespaces WHERE workspace_id = $1 AND name = $2")
                .bind(workspace_id)
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        if exists.is_some() {
            return Err(NamespaceError::Exists(name.to_string()));
        }
        // A name is one tenant's across the gateway: deployment URLs
        // (`/v1/actors/{namespace}/…`) and package names are keyed by it
        // alone. (The registry's claims: `Packages::create_namespace`.)
        if claimed_elsewhere(&mut tx, workspace_id, name).await? {
            return Err(NamespaceError::Taken(name.to_string()));
        }
        if limit > 0 {
            let count: i64 =
                sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM namespaces WHERE workspace_id = $1")
                    .bind(workspace_id)
                    .fetch_one(&mut *tx)
                    .await?;
            if count >= i64::from(limit) {
                return Err(NamespaceError::LimitReached { count, limit });
            }
        }
        sqlx::query("INSERT INTO namespaces (id, workspace_id, name, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&namespace.namespace_id)
            .bind(workspace_id)
            .bind(name)
            .bind(namespace.created_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(namespace)
    }

    pub async fn list(&self, workspace_id: &str) -> Result<Vec<Namespace>, NamespaceError> {
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT id, name, created_at FROM namespaces WHERE workspace_id = $1 ORDER BY name")
                .bind(workspace_id)
                .fetch_all(&self.database.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(namespace_id, name, created_at)| Namespace {
                namespace_id,
                name,
                workspace_id: workspace_id.to_string(),
                created_at,
            })
            .collect())
    }

    pub async fn delete(&self, workspace_id: &str, name: &str) -> Result<(), NamespaceError> {
        let deleted = sqlx::query("DELETE FROM namespaces WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .execute(&self.database.pool)
            .await?;
        match deleted.rows_affected() {
            0 => Err(NamespaceError::NotFound(name.to_string())),
            _ => Ok(()),
        }
    }

    /// Whether this workspace holds the name and no other workspace created
    /// it first (rows from before names were unique across workspaces). The
    /// registry's own claim is [`super::Packages::namespace_owned_by`]'s to check.
    pub async fn held_first_by(&self, workspace_id: &str, name: &str) -> Result<bool, NamespaceError> {
        if !self.held_by(workspace_id, name).await? {
            return Ok(false);
        }
        let earlier_elsewhere: Option<String> = sqlx::query_scalar(
            "SELECT other.id FROM namespaces other JOIN namespaces mine ON mine.name = other.name \
             WHERE mine.workspace_id = $1 AND mine.name = $2 AND other.workspace_id <> $1 \
             AND (other.created_at < mine.created_at OR (other.created_at = mine.created_at AND other.id < mine.id))",
        )
        .bind(workspace_id)
        .bind(name)
        .fetch_optional(&self.database.pool)
        .await?;
        Ok(earlier_elsewhere.is_none())
    }

    /// Whether the workspace has a namespace of this name.
    pub async fn held_by(&self, workspace_id: &str, name: &str) -> Result<bool, NamespaceError> {
        let found: Option<String> =
            sqlx::query_scalar("SELECT id FROM namespaces WHERE workspace_id = $1 AND name = $2")
                .bind(workspace_id)
                .bind(name)
                .fetch_optional(&self.database.pool)
                .await?;
        Ok(found.is_some())
    }
}

/// Whether another workspace holds `name` (or it is the gateway's own).
async fn claimed_elsewhere(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace_id: &str,
    name: &str,
) -> sqlx::Result<bool> {
    let held: Option<String> =
        sqlx::query_scalar("SELECT id FROM namespaces WHERE name = $1 AND workspace_id <> $2 LIMIT 1")
            .bind(name)
            .bind(workspace_id)
            .fetch_optional(&mut **tx)
            .await?;
    Ok(name == super::BUILTIN_NAMESPACE || held.is_some())
}
