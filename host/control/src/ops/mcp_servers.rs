//! The operations on a workspace's remote MCP servers: `mcp_servers.create`,
//! `.list`, `.delete`, over the components concern's API
//! (`tollgate_tools::remote::Remotes`). A remote is an install of another
//! kind: its name shares the workspace's install names, and the registry
//! checks `install.read`/`install.write` before these run. A static
//! credential's value is sealed at once and never shown.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::components::{ListParams, NameParams, Uninstalled};
use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_tools::Installs;
use tollgate_tools::remote::{NewAuth, NewServer, STREAMABLE_HTTP, ServerShown};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// Target workspace; defaults to the calling key's workspace.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The install name its tools are listed under (`<name>__<tool>`).
    pub name: String,
    /// The server's MCP endpoint, e.g. `https://mcp.example.com/mcp`.
    pub url: String,
    /// `streamable-http` (the default); `sse` is not served yet.
    #[serde(default)]
    pub transport: Option<String>,
    /// `"none"`, or `{"header": "authorization", "value": "Bearer …"}`.
    pub auth: NewAuth,
}

#[derive(Serialize, JsonSchema)]
pub struct ServerList {
    pub servers: Vec<ServerShown>,
}

pub async fn create(installs: &Installs, ctx: &Ctx, params: CreateParams) -> Result<ServerShown, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let request = NewServer {
        name: params.name,
        url: params.url,
        transport: params.transport.unwrap_or_else(|| STREAMABLE_HTTP.into()),
        auth: params.auth,
    };
    Ok(installs.create_remote(workspace, request).await?)
}

pub async fn list(installs: &Installs, ctx: &Ctx, _params: ListParams) -> Result<ServerList, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let servers = installs.remotes().list(workspace).await?;
    Ok(ServerList {
        servers: servers.iter().map(ServerShown::from).collect(),
    })
}

pub async fn delete(installs: &Installs, ctx: &Ctx, params: NameParams) -> Result<Uninstalled, OpError> {
    let workspace = &ctx.scope().workspace_id;
    if !installs.remotes().delete(workspace, &params.name).await? {
        return Err(OpError::NotFound(format!("remote MCP server '{}'", params.name)));
    }
    Ok(Uninstalled {
        name: params.name,
        deleted: true,
    })
}
