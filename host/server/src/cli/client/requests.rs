//! Each command as the one control-plane op it calls and that op's params.
//! Absent options are left out rather than sent as null, so the server's
//! defaults apply, and the workspace flag is added only to ops that act in a
//! workspace.

use serde_json::{Value, json};

use super::Connection;
use super::commands::{
    BudgetCommand, ClientCommand, KeysCommand, MembersCommand, NamespaceKeysCommand, NamespacesCommand, PlanCommand,
    PolicyCommand, WalletCommand, WorkspacesCommand,
};

/// `50,80,100` as percents; an empty text is none.
fn alert_list(text: &str) -> Value {
    let percents: Vec<Value> = text
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().map_or_else(|_| json!(p), |n| json!(n)))
        .collect();
    Value::Array(percents)
}

impl ClientCommand {
    pub(super) fn connection(&self) -> &Connection {
        use ClientCommand as C;
        match self {
            C::Signup { connection, .. }
            | C::Workspaces { connection, .. }
            | C::Namespaces { connection, .. }
            | C::Keys { connection, .. }
            | C::Members { connection, .. }
            | C::Wallet { connection, .. }
            | C::Plan { connection, .. }
            | C::Budget { connection, .. }
            | C::Usage { connection, .. }
            | C::Audit { connection, .. }
            | C::Request { connection, .. }
            | C::Install { connection, .. }
            | C::Upgrade { connection, .. }
            | C::Uninstall { connection, .. }
            | C::Installs { connection }
            | C::McpServers { connection, .. } => connection,
        }
    }

    /// The op and its params.
    /// The op and its params; fails only when a secret a command names
    /// cannot be read.
    pub(super) fn op(&self, workspace: Option<&str>) -> anyhow::Result<(&'static str, Value)> {
        use ClientCommand as C;
        let (op, mut params) = match self {
            C::Signup { name, email, .. } => ("accounts.signup", json!({"name": name, "email": email})),
            C::Workspaces {
                command: WorkspacesCommand::List,
                ..
            } => ("workspaces.list", json!({})),
            C::Workspaces {
                command: WorkspacesCommand::Create { name },
                ..
            } => ("workspaces.create", json!({"name": name})),
            C::Workspaces {
                command: WorkspacesCommand::Get { workspace_id },
                ..
            } => (
                "workspaces.get",
                json!({"workspace_id": workspace_id.as_deref().or(workspace)}),
            ),
            C::Workspaces {
                command: WorkspacesCommand::Rename { workspace_id, name },
                ..
            } => ("workspaces.rename", json!({"workspace_id": workspace_id, "name": name})),
            C::Workspaces {
                command: WorkspacesCommand::Delete { workspace_id },
                ..
            } => ("workspaces.delete", json!({"workspace_id": workspace_id})),
            C::Workspaces {
                command: WorkspacesCommand::Sso { required, workspace_id },
                ..
            } => (
                "workspaces.sso.set",
                json!({"workspace_id": workspace_id, "required": required}),
            ),
            C::Workspaces {
                command: WorkspacesCommand::PackagePolicy { command },
                ..
            } => match command {
                PolicyCommand::Show => ("workspaces.package-policy.get", json!({})),
                PolicyCommand::Set { require_signed } => (
                    "workspaces.package-policy.set",
                    json!({"require_signed": require_signed}),
                ),
            },
            C::Namespaces {
                command: NamespacesCommand::Keys { command },
                ..
            } => match command {
                NamespaceKeysCommand::Add {
                    namespace,
                    public_key,
                    name,
                } => (
                    "namespaces.keys.add",
                    json!({"namespace": namespace, "public_key": public_key, "name": name}),
                ),
                NamespaceKeysCommand::List { namespace } => ("namespaces.keys.list", json!({"namespace": namespace})),
                NamespaceKeysCommand::Revoke { namespace, key_id } => (
                    "namespaces.keys.revoke",
                    json!({"namespace": namespace, "key_id": key_id}),
                ),
            },
            C::Namespaces {
                command: NamespacesCommand::List,
                ..
            } => ("namespaces.list", json!({})),
            C::Namespaces {
                command: NamespacesCommand::Create { name },
                ..
            } => ("namespaces.create", json!({"name": name})),
            C::Namespaces {
                command: NamespacesCommand::Delete { name },
                ..
            } => ("namespaces.delete", json!({"name": name})),
            C::Keys {
                command: KeysCommand::List,
                ..
            } => ("keys.list", json!({})),
            C::Keys {
                command:
                    KeysCommand::Create {
                        name,
                        scope,
                        requests_per_minute,
                        tools,
                    },
                ..
            } => (
                "keys.create",
                json!({"name": name, "scope": scope, "requests_per_minute": requests_per_minute, "tools": tools}),
            ),
            C::Keys {
                command: KeysCommand::Revoke { key_id },
                ..
            } => ("keys.revoke", json!({"key_id": key_id})),
            C::Keys {
                command: KeysCommand::SetTools { key_id, tools, .. },
                ..
            } => ("keys.set-tools", json!({"key_id": key_id, "tools": tools})),
            C::Members {
                command: MembersCommand::List,
                ..
            } => ("members.list", json!({})),
            C::Members {
                command: MembersCommand::Add { email, role },
                ..
            } => ("members.add", json!({"email": email, "role": role})),
            C::Members {
                command: MembersCommand::SetRole { user_id, role },
                ..
            } => ("members.set-role", json!({"user_id": user_id, "role": role})),
            C::Members {
                command: MembersCommand::Remove { user_id },
                ..
            } => ("members.remove", json!({"user_id": user_id})),
            C::Wallet { command: None, .. } => ("wallet.get", json!({})),
            C::Wallet {
                command: Some(WalletCommand::Topup { usd }),
                ..
            } => ("billing.topups.create", json!({"amount_usd": usd})),
            C::Wallet {
                command: Some(WalletCommand::Topups { limit }),
                ..
            } => ("billing.topups.list", json!({"limit": limit})),
            C::Plan { command, .. } => match command {
                PlanCommand::List => ("billing.plans.list", json!({})),
                PlanCommand::Show => ("billing.plan.get", json!({})),
                PlanCommand::Change { plan } => ("billing.plan.change", json!({"plan": plan})),
                PlanCommand::Usage => ("billing.usage.month", json!({})),
            },
            C::Budget { command, .. } => match command {
                BudgetCommand::Show => ("billing.limits.get", json!({})),
                BudgetCommand::Set {
                    target,
                    period,
                    limit_usd,
                    max_request_usd,
                    alerts,
                } => (
                    "billing.limits.set",
                    json!({"scope": target.scope, "key_id": target.key_id, "period": period,
                           "limit_usd": limit_usd, "max_request_usd": max_request_usd,
                           "alert_thresholds": alerts.as_deref().map(alert_list)}),
                ),
                BudgetCommand::Remove { target } => (
                    "billing.limits.set",
                    json!({"scope": target.scope, "key_id": target.key_id, "remove": true}),
                ),
            },
            C::Usage {
                since_ms,
                until_ms,
                key,
                limit,
                cursor,
                ..
            } => (
                "usage.list",
                json!({"since_ms": since_ms, "until_ms": until_ms, "key_id": key, "limit": limit, "cursor": cursor}),
            ),
            C::Audit {
                op,
                actor,
                since_ms,
                until_ms,
                limit,
                cursor,
                ..
            } => (
                "audit.list",
                json!({"op": op, "actor": actor, "since_ms": since_ms, "until_ms": until_ms, "limit": limit, "cursor": cursor}),
            ),
            C::Request { request_id, .. } => ("requests.get", json!({"request_id": request_id})),
            C::Install {
                package,
                name,
                allow_origins,
                settings,
                credentials,
                ..
            } => {
                let (package, version) = match package.split_once('@') {
                    Some((package, version)) => (package, Some(version)),
                    None => (package.as_str(), None),
                };
                let config: serde_json::Map<String, Value> =
                    settings.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                let credentials: serde_json::Map<String, Value> = credentials
                    .iter()
                    .map(|(name, placement, value)| (name.clone(), json!({"value": value, "placement": placement})))
                    .collect();
                (
                    "installs.create",
                    json!({"package": package, "version": version, "name": name, "origins": allow_origins, "config": config, "credentials": credentials}),
                )
            }
            C::Upgrade { name, version, .. } => ("installs.update", json!({"name": name, "version": version})),
            C::Uninstall { name, .. } => ("installs.delete", json!({"name": name})),
            C::Installs { .. } => ("installs.list", json!({})),
            C::McpServers { command, .. } => command.op()?,
        };
        let object = params.as_object_mut().expect("params are an object");
        object.retain(|_, v| !v.is_null());
        let workspace_scoped = !matches!(
            op,
            "accounts.signup" | "workspaces.list" | "workspaces.create" | "billing.plans.list"
        );
        if workspace_scoped
            && !object.contains_key("workspace_id")
            && let Some(workspace) = workspace
        {
            object.insert("workspace_id".into(), json!(workspace));
        }
        Ok((op, params))
    }
}
