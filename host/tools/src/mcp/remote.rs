//! Remote MCP servers' tools on `/v1/mcp` and `/v1/mcp/{name}`: listed under
//! the remote's name as a component's are under its install's
//! (`<name>__<tool>`, plain inside its own scope), and called through the
//! gateway's MCP client (`crate::remote`). A call is admitted here as a
//! component's is (the key's rate, the plan), then guarded and logged by
//! `remote::calls`; the remote's result is relayed as it answered it.

use serde_json::{Value, json};

use super::Scope;
use super::catalog::{INTERNAL_ERROR, Outcome};
use crate::calls::{CallSite, SEPARATOR};
use crate::remote::calls::Refusal;
use crate::remote::client::RemoteError;
use crate::remote::{self, ServerRecord};

/// The remotes in scope: the workspace's, or the one `/v1/mcp/{name}` names;
/// only those the caller's tool policy lets it use something of.
pub(super) async fn in_scope(scope: &Scope) -> Vec<ServerRecord> {
    match scope.components.installs.remotes().list(scope.workspace_id()).await {
        Ok(servers) => servers
            .into_iter()
            .filter(|server| scope.only.as_deref().is_none_or(|only| only == server.name))
            .filter(|server| scope.policy().sees(&server.name))
            .collect(),
        Err(error) => {
            tracing::error!(%error, "reading the workspace's remote MCP servers");
            Vec::new()
        }
    }
}

/// Every remote's list from `method` (items under `field`), asked of all
/// at once, each item's `name` prefixed with the remote's on `/v1/mcp`. A
/// remote that fails to answer is left out (and logged), so one bad server
/// does not hide the others'. Tools and prompts are kept as the caller's
/// tool policy allows each; resources and templates only from a remote it
/// allows whole.
pub(super) async fn gather(scope: &Scope, method: &str, field: &str) -> Vec<Value> {
    let by_name = matches!(field, "tools" | "prompts");
    let mut servers = in_scope(scope).await;
    servers.retain(|server| by_name || scope.policy().allows_whole(&server.name));
    let remotes = scope.components.installs.remotes();
    let lists =
        futures_util::future::join_all(servers.iter().map(|server| remotes.listed(server, method, field))).await;
    let mut items = Vec::new();
    for (server, listed) in servers.iter().zip(lists) {
        match listed {
            Ok(listed) => items.extend(listed.into_iter().filter_map(|mut item| {
                let name = item["name"].as_str().unwrap_or_default();
                if by_name && !scope.policy().allows(&server.name, name) {
                    return None;
                }
                item["name"] = json!(super::catalog::named(scope, &server.name, name));
                Some(item)
            })),
            Err(error) => tracing::warn!(server = %server.name, %error, "a remote MCP server's {field} are left out"),
        }
    }
    items
}

/// `prompts/get` or `resources/read` on one remote (already admitted): its
/// result as it answered it, its JSON-RPC error as the caller's, or -32603
/// saying why it could not be had.
pub(super) async fn forward(scope: &Scope, server: &ServerRecord, method: &str, params: Value) -> Outcome {
    let remotes = scope.components.installs.remotes();
    remotes
        .request(server, method, params)
        .await
        .map_err(|error| match error {
            RemoteError::Rpc { code, message } => (code, message),
            other => (INTERNAL_ERROR, format!("remote MCP server '{}': {other}", server.name)),
        })
}

/// The one remote in scope that lists resource `uri`, else the one whose
/// URI template matches it, as for component installs (on `/v1/mcp/{name}`,
/// that remote).
pub(super) async fn resource_owner(scope: &Scope, uri: &str) -> Option<ServerRecord> {
    let servers = readable(scope).await;
    if scope.only.is_some() {
        return servers.into_iter().next();
    }
    let listing = |item: &Value| item.get("uri").and_then(Value::as_str) == Some(uri);
    let matching = |item: &Value| {
        let template = item.get("uriTemplate").and_then(Value::as_str);
        template.is_some_and(|template| super::catalog::template_matches(template, uri))
    };
    let listed = claimants(scope, &servers, "resources/list", "resources", listing).await;
    let claimed = match listed.is_empty() {
        false => listed,
        true => {
            claimants(
                scope,
                &servers,
                "resources/templates/list",
                "resourceTemplates",
                matching,
            )
            .await
        }
    };
    match <[_; 1]>::try_from(claimed) {
        Ok([owner]) => Some(owner.clone()),
        Err(_) => None,
    }
}

/// The one remote in scope that offers URI template `template` exactly.
pub(super) async fn template_owner(scope: &Scope, template: &str) -> Option<ServerRecord> {
    let servers = readable(scope).await;
    let offers = |item: &Value| item.get("uriTemplate").and_then(Value::as_str) == Some(template);
    let claimed = claimants(scope, &servers, "resources/templates/list", "resourceTemplates", offers).await;
    match <[_; 1]>::try_from(claimed) {
        Ok([owner]) => Some(owner.clone()),
        Err(_) => None,
    }
}

/// The remotes in scope whose resources the caller may read: those its
/// tool policy allows whole.
async fn readable(scope: &Scope) -> Vec<ServerRecord> {
    let mut servers = in_scope(scope).await;
    servers.retain(|server| scope.policy().allows_whole(&server.name));
    servers
}

/// The servers whose list from `method` has an item that `claims`.
async fn claimants<'a>(
    scope: &Scope,
    servers: &'a [ServerRecord],
    method: &str,
    field: &str,
    claims: impl Fn(&Value) -> bool,
) -> Vec<&'a ServerRecord> {
    let remotes = scope.components.installs.remotes();
    let lists =
        futures_util::future::join_all(servers.iter().map(|server| remotes.listed(server, method, field))).await;
    servers
        .iter()
        .zip(lists)
        .filter(|(_, listed)| listed.as_ref().is_ok_and(|listed| listed.iter().any(&claims)))
        .map(|(server, _)| server)
        .collect()
}

/// The remote and its tool (or prompt) that `name` means, if it names one
/// in scope that the caller's tool policy allows.
pub(super) async fn resolve(scope: &Scope, name: &str) -> Option<(ServerRecord, String)> {
    let (server, tool) = match scope.only.as_deref() {
        Some(only) => (only, name),
        None => name.split_once(SEPARATOR)?,
    };
    if !scope.policy().allows(server, tool) {
        return None;
    }
    let found = scope
        .components
        .installs
        .remotes()
        .get(scope.workspace_id(), server)
        .await;
    match found {
        Ok(found) => found.map(|record| (record, tool.to_string())),
        Err(error) => {
            tracing::error!(%error, "reading a remote MCP server");
            None
        }
    }
}

/// `tools/call` on a remote (already admitted): the remote's result, or a
/// tool result with `isError` saying why it could not be had. A JSON-RPC
/// error the remote answered goes back as the caller's error.
pub(super) async fn call_tool(
    scope: &Scope,
    server: &ServerRecord,
    tool: &str,
    arguments: Value,
) -> Result<Value, (i64, String)> {
    let site = CallSite {
        caller: scope.caller.clone(),
        parent_request_id: scope.request_id.clone(),
        depth: 0,
        ceiling: None,
    };
    match remote::calls::call(&scope.components, &site, server, tool, arguments).await {
        Ok(result) => Ok(result),
        Err(Refusal::Guard(refused)) => Ok(super::tool_result(Err(refused))),
        Err(Refusal::Remote(RemoteError::Rpc { code, message })) => Err((code, message)),
        Err(Refusal::Remote(error)) => {
            let text = format!("remote MCP server '{}': {error}", server.name);
            Ok(json!({"content": [{"type": "text", "text": text}], "isError": true}))
        }
    }
}
