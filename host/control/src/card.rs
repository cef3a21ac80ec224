//! The Agent Card, in the pure A2A v1.0 shape (no v0.3 top-level fields). The
//! control-plane extension lists every op and its method; the extended card
//! (authenticated `GetExtendedAgentCard`) adds each op's JSON Schemas.

use serde_json::{Value, json};

use super::registry::ops;

pub const EXTENSION_URI: &str = "https://tollgate.dev/a2a/extensions/control-plane/v1";

/// Skills, one per resource: (id, name, categories, examples).
const SKILLS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "accounts",
        "Accounts",
        &["accounts"],
        &[r#"{"op": "accounts.signup", "params": {"name": "Ada", "email": "ada@example.com"}}"#],
    ),
    (
        "workspaces",
        "Workspaces",
        &["workspaces"],
        &[
            r#"{"op": "workspaces.create", "params": {"name": "research"}}"#,
            r#"{"op": "workspaces.list", "params": {}}"#,
        ],
    ),
    (
        "namespaces",
        "Namespaces",
        &["namespaces"],
        &[r#"{"op": "namespaces.create", "params": {"name": "team-a"}}"#],
    ),
    (
        "members",
        "Members and roles",
        &["members"],
        &[r#"{"op": "members.add", "params": {"email": "bob@example.com", "role": "developer"}}"#],
    ),
    (
        "keys",
        "API keys",
        &["keys"],
        &[
            r#"{"op": "keys.create", "params": {"name": "ci"}}"#,
            r#"{"op": "keys.revoke", "params": {"key_id": "key_…"}}"#,
        ],
    ),
    (
        "billing",
        "Wallet, plans and usage",
        &["wallet", "billing", "usage", "requests"],
        &[
            r#"{"op": "wallet.get", "params": {}}"#,
            r#"{"op": "billing.usage.month", "params": {}}"#,
            r#"{"op": "usage.list", "params": {"limit": 20}}"#,
        ],
    ),
];

pub fn agent_card(base_url: &str, extended: bool) -> Value {
    let op_entries: Vec<Value> = ops()
        .iter()
        .map(|op| {
            let mut entry = json!({
                "op": op.name,
                "method": op.method(),
                "description": op.summary,
                "permission": op.permission().map(|p| p.as_str()),
                "authenticated": op.access != super::registry::Access::Public,
            });
            if extended {
                entry["paramsSchema"] = (op.params_schema)();
                entry["resultSchema"] = (op.result_schema)();
            }
            entry
        })
        .collect();
    let skills: Vec<Value> = SKILLS
        .iter()
        .map(|(id, name, categories, examples)| {
            let names: Vec<&str> = ops()
                .iter()
                .filter(|op| categories.contains(&op.category()))
                .map(|op| op.name)
                .collect();
            json!({
                "id": id,
                "name": name,
                "description": format!("Operations: {}. Send one data part {{\"op\", \"params\"}} or call the extension method.", names.join(", ")),
                "tags": ["control-plane", id],
                "examples": examples,
                "inputModes": ["application/json"],
                "outputModes": ["application/json"],
            })
        })
        .collect();
    json!({
        "name": "Tollgate control plane",
        "description": "Manage Tollgate workspaces, namespaces, members, API keys, wallets and usage.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{base_url}/a2a"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }],
        "provider": { "organization": "Tollgate", "url": "https://tollgate.dev" },
        "capabilities": {
            "streaming": false,
            "pushNotifications": false,
            "extendedAgentCard": true,
            "extensions": [{
                "uri": EXTENSION_URI,
                "description": "Tollgate control-plane operations as JSON-RPC methods named {category}/{action}; each returns the same JSON as the SendMessage data artifact.",
                "required": false,
                "params": { "operations": op_entries },
            }],
        },
        "securitySchemes": { "bearer": { "httpAuthSecurityScheme": { "scheme": "Bearer", "description": "A Tollgate API key (tg_live_…)." } } },
        "securityRequirements": [{ "schemes": { "bearer": { "list": [] } } }],
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": skills,
    })
}
