//! Workspaces and who may act in them: create, list, rename, soft delete (which
//! revokes the workspace's keys everywhere), and a user's role in one.

use schemars::JsonSchema;
use serde::Serialize;

use super::{AccountError, Accounts, Tx, create_workspace};
use crate::auth::KeyChange;
use crate::auth::permissions::Role;
use tollgate_core::db::now_unix;
use tollgate_core::money::Nanos;

/// A workspace as one of its members sees it.
#[derive(Serialize, JsonSchema)]
pub struct Workspace {
    pub workspace_id: String,
    pub name: String,
    pub plan: String,
    /// The caller's role in this workspace.
    pub role: String,
    pub created_at: i64,
    /// Console sign-in and key creation need an OIDC session
    /// (`workspaces.sso.set`; docs/console.md).
    pub require_sso: bool,
}

type Row = (String, String, String, i64, String, i64);

fn workspace((workspace_id, name, plan, created_at, role, require_sso): Row) -> Workspace {
    Workspace {
        workspace_id,
        name,
        plan,
        role,
        created_at,
        require_sso: require_sso != 0,
    }
}

/// Takes the workspace's row lock inside `tx` on Postgres (SQLite's `BEGIN
/// IMMEDIATE` already serialises writers), so checks made in `tx` against the
/// workspace's other rows (a namespace limit, say) hold until it commits.
pub async fn lock_workspace(tx: &mut Tx, workspace_id: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE workspaces SET name = name WHERE id = $1")
        .bind(workspace_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Accounts {
    /// Whether the workspace exists and is not deleted.
    pub async fn workspace_is_live(&self, workspace_id: &str) -> sqlx::Result<bool> {
        let found: Option<String> =
            sqlx::query_scalar("SELECT id FROM workspaces WHERE id = $1 AND deleted_at IS NULL")
                .bind(workspace_id)
                .fetch_optional(&self.database.pool)
                .await?;
        Ok(found.is_some())
    }

    /// A live workspace, shown with `role` as the viewer's role.
    pub async fn workspace(&self, workspace_id: &str, role: Role) -> sqlx::Result<Option<Workspace>> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, name, plan, created_at, CAST($2 AS TEXT), require_sso FROM workspaces \
             WHERE id = $1 AND deleted_at IS NULL",
        )
        .bind(workspace_id)
        .bind(role.as_str())
        .fetch_optional(&self.database.pool)
        .await?;
        Ok(row.map(workspace))
    }

    /// The live workspaces `user_id` belongs to, with their role in each.
    pub async fn workspaces_of(&self, user_id: &str) -> sqlx::Result<Vec<Workspace>> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT w.id, w.name, w.plan, w.created_at, m.role, w.require_sso FROM workspaces w \
             JOIN memberships m ON m.workspace_id = w.id \
             WHERE m.user_id = $1 AND w.deleted_at IS NULL ORDER BY w.created_at, w.id",
        )
        .bind(user_id)
        .fetch_all(&self.database.pool)
        .await?;
        Ok(rows.into_iter().map(workspace).collect())
    }

    /// `user_id`'s role in a live workspace; `None` if not a member.
    pub async fn role_in(&self, workspace_id: &str, user_id: &str) -> sqlx::Result<Option<Role>> {
        let role: Option<String> = sqlx::query_scalar(
            "SELECT m.role FROM memberships m JOIN workspaces w ON w.id = m.workspace_id \
             WHERE m.workspace_id = $1 AND m.user_id = $2 AND w.deleted_at IS NULL",
        )
        .bind(workspace_id)
        .bind(user_id)
        .fetch_optional(&self.database.pool)
        .await?;
        Ok(role.and_then(|r| Role::parse(&r)))
    }

    /// Whether the workspace requires sign-in through an identity provider.
    pub async fn requires_sso(&self, workspace_id: &str) -> sqlx::Result<bool> {
        let required: Option<i64> = sqlx::query_scalar("SELECT require_sso FROM workspaces WHERE id = $1")
            .bind(workspace_id)
            .fetch_optional(&self.database.pool)
            .await?;
        Ok(required.unwrap_or(0) != 0)
    }

    /// Turns the SSO requirement of a live workspace on or off (the caller
    /// checked the plan allows it); whether there was such a workspace.
    pub async fn set_requires_sso(&self, workspace_id: &str, required: bool) -> sqlx::Result<bool> {
        let done = sqlx::query("UPDATE workspaces SET require_sso = $1 WHERE id = $2 AND deleted_at IS NULL")
            .bind(i64::from(required))
            .bind(workspace_id)
            .execute(&self.database.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The workspace's plan (deleted workspaces too: the ledger outlives them).
    pub async fn plan(&self, workspace_id: &str) -> sqlx::Result<String> {
        sqlx::query_scalar("SELECT plan FROM workspaces WHERE id = $1")
            .bind(workspace_id)
            .fetch_one(&self.database.pool)
            .await
    }

    /// Puts the live workspace on `plan` (a plan id the caller checked);
    /// whether there was such a workspace.
    pub async fn set_plan(&self, workspace_id: &str, plan: &str) -> sqlx::Result<bool> {
        let done = sqlx::query("UPDATE workspaces SET plan = $1 WHERE id = $2 AND deleted_at IS NULL")
            .bind(plan)
            .bind(workspace_id)
            .execute(&self.database.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Each plan in use and one live workspace on it, to check at start
    /// that the configuration defines them all.
    pub async fn plans_in_use(&self) -> sqlx::Result<Vec<(String, String)>> {
        sqlx::query_as("SELECT MIN(id), plan FROM workspaces WHERE deleted_at IS NULL GROUP BY plan ORDER BY plan")
            .fetch_all(&self.database.pool)
            .await
    }

    /// A new workspace in the same account as `sibling_id`, owned by `user_id`,
    /// with an empty wallet; returns its id.
    pub async fn create_workspace(&self, sibling_id: &str, user_id: &str, name: &str) -> Result<String, AccountError> {
        let account_id: String = sqlx::query_scalar("SELECT account_id FROM workspaces WHERE id = $1")
            .bind(sibling_id)
            .fetch_one(&self.database.pool)
            .await?;
        let mut tx = self.database.begin_write().await?;
        let workspace_id = create_workspace(&mut tx, &account_id, user_id, name, Nanos(0)).await?;
        tx.commit().await?;
        Ok(workspace_id)
    }

    pub async fn rename_workspace(&self, workspace_id: &str, name: &str) -> sqlx::Result<()> {
        sqlx::query("UPDATE workspaces SET name = $1 WHERE id = $2")
            .bind(name)
            .bind(workspace_id)
            .execute(&self.database.pool)
            .await?;
        Ok(())
    }

    /// Soft delete: the ledger keeps referencing the workspace, so its rows
    /// stay; its keys are revoked, and every gateway drops them from its cache.
    pub async fn delete_workspace(&self, workspace_id: &str) -> Result<(), AccountError> {
        let now = now_unix();
        let mut tx = self.database.begin_write().await?;
        sqlx::query("UPDATE workspaces SET deleted_at = $1 WHERE id = $2")
            .bind(now)
            .bind(workspace_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE workspace_id = $2 AND revoked_at IS NULL")
            .bind(now)
            .bind(workspace_id)
            .execute(&mut *tx)
            .await?;
        let change = KeyChange::Workspace {
            workspace_id: workspace_id.to_string(),
        };
        self.keys.commit_change(tx, change).await?;
        Ok(())
    }
}

/// Puts the workspace on `plan` inside the caller's transaction (a payment's
/// webhook, which must change the plan together with what it records); with
/// `only_from`, only while the workspace is on that plan, so an ended
/// subscription downgrades only the plan it paid for.
pub async fn set_plan_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace_id: &str,
    plan: &str,
    only_from: Option<&str>,
) -> sqlx::Result<bool> {
    let done = match only_from {
        None => {
            sqlx::query("UPDATE workspaces SET plan = $2 WHERE id = $1 AND deleted_at IS NULL")
                .bind(workspace_id)
                .bind(plan)
                .execute(&mut **tx)
                .await?
        }
        Some(from) => {
            sqlx::query("UPDATE workspaces SET plan = $2 WHERE id = $1 AND deleted_at IS NULL AND plan = $3")
                .bind(workspace_id)
                .bind(plan)
                .bind(from)
                .execute(&mut **tx)
                .await?
        }
    };
    Ok(done.rows_affected() == 1)
}
