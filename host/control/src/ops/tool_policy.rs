//! The workspace's tool lists per role (`workspaces.tool-policy.get`,
//! `.set`): which installs and tools its admins' and developers' keys may
//! reach over MCP, over the accounts API, which makes a change reach every
//! gateway's key cache at once. A key's own list is `keys.create`'s
//! `tools`. docs/mcp.md, "Tool policy", says how a list reads.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_identity::accounts::Accounts;
use tollgate_identity::auth::permissions::Role;
use tollgate_identity::auth::tool_policy;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// `admin` or `developer` (owners are never limited by a role's list;
    /// viewers cannot call the data plane).
    pub role: Role,
    /// Install names (everything the install offers) and
    /// `<install>__<tool>` names (one tool or prompt); `null` removes the
    /// role's list.
    pub tools: Option<Vec<String>>,
}

#[derive(Serialize, JsonSchema)]
pub struct Policies {
    /// Each limited role's list; a role not here may use every install.
    pub roles: BTreeMap<String, Vec<String>>,
}

pub async fn get(accounts: &Accounts, ctx: &Ctx, _params: super::workspaces::Target) -> Result<Policies, OpError> {
    policies(accounts, &ctx.scope().workspace_id).await
}

async fn policies(accounts: &Accounts, workspace_id: &str) -> Result<Policies, OpError> {
    let roles = accounts.role_tool_policies(workspace_id).await?;
    Ok(Policies {
        roles: roles
            .into_iter()
            .map(|(role, tools)| (role.as_str().to_string(), tools))
            .collect(),
    })
}

pub async fn set(accounts: &Accounts, ctx: &Ctx, params: SetParams) -> Result<Policies, OpError> {
    if !matches!(params.role, Role::Admin | Role::Developer) {
        return Err(OpError::InvalidParams(format!(
            "role '{}' cannot have a tool list: owners are never limited by one and viewers cannot call the data plane",
            params.role.as_str()
        )));
    }
    // A key held to a list of its own must not lift the lists of others.
    if ctx.caller()?.tools.key.is_some() {
        return Err(OpError::PermissionDenied(
            "a key limited to some tools may not set the workspace's tool policy".into(),
        ));
    }
    let tools = (params.tools.map(tool_policy::normalize).transpose()).map_err(OpError::InvalidParams)?;
    let workspace_id = &ctx.scope().workspace_id;
    accounts
        .set_role_tools(workspace_id, params.role, tools.as_deref())
        .await?;
    policies(accounts, workspace_id).await
}
