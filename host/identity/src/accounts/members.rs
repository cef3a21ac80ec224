//! Users and their roles in a workspace: find a user by e-mail, list, add,
//! change a role, remove. A role change or a removal reaches every gateway's
//! key cache when it commits.

use schemars::JsonSchema;
use serde::Serialize;

use super::{AccountError, Accounts};
use crate::auth::KeyChange;
use crate::auth::permissions::Role;
use tollgate_core::db::now_unix;

#[derive(Serialize, JsonSchema)]
pub struct Member {
    pub user_id: String,
    pub name: String,
    pub email: String,
    pub role: Role,
    pub created_at: i64,
}

type Row = (String, String, String, String, i64);

fn member((user_id, name, email, role, created_at): Row) -> Member {
    Member {
        user_id,
        name,
        email,
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        created_at,
    }
}

fn member_change(workspace_id: &str, user_id: &str) -> KeyChange {
    KeyChange::Member {
        workspace_id: workspace_id.to_string(),
        user_id: user_id.to_string(),
    }
}

impl Accounts {
    /// The user with this (normalised) e-mail.
    pub async fn user_by_email(&self, email: &str) -> sqlx::Result<Option<String>> {
        sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
            .bind(email)
            .fetch_optional(&self.database.pool)
            .await
    }

    /// The user with this (normalised) e-mail, created with `name` if there
    /// is none: an identity provider provisioning someone into a workspace
    /// (SCIM) names them by e-mail, whether or not they signed up.
    pub async fn user_for_email(&self, email: &str, name: &str) -> sqlx::Result<String> {
        if let Some(user_id) = self.user_by_email(email).await? {
            return Ok(user_id);
        }
        let user_id = tollgate_core::db::new_id("user");
        sqlx::query(
            "INSERT INTO users (id, name, email, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (email) DO NOTHING",
        )
        .bind(&user_id)
        .bind(name)
        .bind(email)
        .bind(now_unix())
        .execute(&self.database.pool)
        .await?;
        // Another provisioning of the same address may have won the insert.
        Ok(self.user_by_email(email).await?.unwrap_or(user_id))
    }

    pub async fn member(&self, workspace_id: &str, user_id: &str) -> sqlx::Result<Option<Member>> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT u.id, u.name, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.workspace_id = $1 AND m.user_id = $2",
        )
        .bind(workspace_id)
        .bind(user_id)
        .fetch_optional(&self.database.pool)
        .await?;
        Ok(row.map(member))
    }

    pub async fn members(&self, workspace_id: &str) -> sqlx::Result<Vec<Member>> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT u.id, u.name, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.workspace_id = $1 ORDER BY m.created_at, u.id",
        )
        .bind(workspace_id)
        .fetch_all(&self.database.pool)
        .await?;
        Ok(rows.into_iter().map(member).collect())
    }

    pub async fn owner_count(&self, workspace_id: &str) -> sqlx::Result<i64> {
        sqlx::query_scalar(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM memberships WHERE workspace_id = $1 AND role = 'owner'",
        )
        .bind(workspace_id)
        .fetch_one(&self.database.pool)
        .await
    }

    /// Adds `user_id` with `role`; `AlreadyMember` (naming `email`) if they
    /// are one, `SeatLimit` if the workspace already has `seats` members
    /// (`None`: no limit). The count and the insert share one transaction
    /// under the workspace's lock, so concurrent adds cannot pass the limit.
    pub async fn add_member(
        &self,
        workspace_id: &str,
        user_id: &str,
        email: &str,
        role: Role,
        seats: Option<u32>,
    ) -> Result<(), AccountError> {
        let mut tx = self.database.begin_write().await?;
        super::lock_workspace(&mut tx, workspace_id).await?;
        let exists: Option<String> =
            sqlx::query_scalar("SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2")
                .bind(workspace_id)
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await?;
        if exists.is_some() {
            return Err(AccountError::AlreadyMember(email.to_string()));
        }
        if let Some(limit) = seats {
            let count: i64 =
                sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM memberships WHERE workspace_id = $1")
                    .bind(workspace_id)
                    .fetch_one(&mut *tx)
                    .await?;
            if count >= i64::from(limit) {
                return Err(AccountError::SeatLimit { count, limit });
            }
        }
        sqlx::query("INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)")
            .bind(workspace_id)
            .bind(user_id)
            .bind(role.as_str())
            .bind(now_unix())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn set_role(&self, workspace_id: &str, user_id: &str, role: Role) -> Result<(), AccountError> {
        let mut tx = self.database.begin_write().await?;
        sqlx::query("UPDATE memberships SET role = $1 WHERE workspace_id = $2 AND user_id = $3")
            .bind(role.as_str())
            .bind(workspace_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        self.keys
            .commit_change(tx, member_change(workspace_id, user_id))
            .await?;
        Ok(())
    }

    /// Removes the membership; the user's keys in this workspace stop resolving.
    pub async fn remove_member(&self, workspace_id: &str, user_id: &str) -> Result<(), AccountError> {
        let mut tx = self.database.begin_write().await?;
        sqlx::query("DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2")
            .bind(workspace_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        self.keys
            .commit_change(tx, member_change(workspace_id, user_id))
            .await?;
        Ok(())
    }
}
