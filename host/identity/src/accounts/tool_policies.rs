//! The workspace's tool lists per role (`role_tool_policies`): which
//! installs and tools its admins' or developers' keys may reach over MCP
//! (`auth::tool_policy` says how a list reads). Setting or clearing one
//! commits through `KeyResolver::commit_change` for the whole workspace, so
//! every gateway re-reads its keys and the list holds at once.

use std::collections::BTreeMap;

use super::{AccountError, Accounts};
use crate::auth::KeyChange;
use crate::auth::permissions::Role;
use crate::auth::tool_policy;
use tollgate_core::db::now_unix;

impl Accounts {
    /// The workspace's lists, by role; a role without one is not there.
    pub async fn role_tool_policies(&self, workspace_id: &str) -> sqlx::Result<BTreeMap<Role, Vec<String>>> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT role, tools FROM role_tool_policies WHERE workspace_id = $1")
                .bind(workspace_id)
                .fetch_all(&self.database.pool)
                .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(role, tools)| Some((Role::parse(&role)?, tool_policy::from_column(Some(tools))?)))
            .collect())
    }

    /// The list for `role`, if the workspace set one (for a console
    /// session, which resolves its user's role itself).
    pub async fn role_tools(&self, workspace_id: &str, role: Role) -> sqlx::Result<Option<Vec<String>>> {
        let tools: Option<String> =
            sqlx::query_scalar("SELECT tools FROM role_tool_policies WHERE workspace_id = $1 AND role = $2")
                .bind(workspace_id)
                .bind(role.as_str())
                .fetch_optional(&self.database.pool)
                .await?;
        Ok(tool_policy::from_column(tools))
    }

    /// Sets `role`'s list (`tools`, already normalized), or removes it
    /// (`None`).
    pub async fn set_role_tools(
        &self,
        workspace_id: &str,
        role: Role,
        tools: Option<&[String]>,
    ) -> Result<(), AccountError> {
        let mut tx = self.database.begin_write().await?;
        sqlx::query("DELETE FROM role_tool_policies WHERE workspace_id = $1 AND role = $2")
            .bind(workspace_id)
            .bind(role.as_str())
            .execute(&mut *tx)
            .await?;
        if let Some(column) = tool_policy::to_column(tools) {
            sqlx::query(
                "INSERT INTO role_tool_policies (workspace_id, role, tools, updated_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(workspace_id)
            .bind(role.as_str())
            .bind(column)
            .bind(now_unix())
            .execute(&mut *tx)
            .await?;
        }
        let change = KeyChange::Workspace {
            workspace_id: workspace_id.to_string(),
        };
        self.keys.commit_change(tx, change).await?;
        Ok(())
    }
}
