//! What the control plane writes to the audit log (`tollgate_audit`): one
//! row for every run of an op that may change state, after it ends, with
//! the caller, the op's target, its params, the state before (read through
//! the matching read op) and after (its result), and how it ended.
//!
//! Every op changes state unless listed in [`READS`], so an op added later is
//! audited without anyone remembering to. A run refused before anyone was
//! authenticated is not recorded: anybody could fill the log with those.

use serde_json::{Map, Value};

use super::ControlPlane;
use super::error::OpError;
use super::registry::{Ctx, Op, by_name};
use tollgate_audit::{Actor, ActorKind, Change, Failure};
use tollgate_identity::auth::audit_actor;

/// The ops that change nothing.
pub const READS: &[&str] = &[
    "workspaces.list",
    "workspaces.get",
    "namespaces.list",
    "namespaces.keys.list",
    "workspaces.package-policy.get",
    "workspaces.tool-policy.get",
    "members.list",
    "keys.list",
    "wallet.get",
    "billing.plans.list",
    "billing.plan.get",
    "billing.topups.list",
    "billing.usage.month",
    "billing.limits.get",
    "usage.list",
    "requests.get",
    "packages.search",
    "packages.get",
    "adapters.list",
    "installs.list",
    "installs.get",
    "guardrails.list",
    "mcp_servers.list",
    "actors.compile",
    "actors.get",
    "actors.list",
    "deployments.list",
    "deployments.get",
    "runs.get",
    "audit.list",
    "scim.tokens.list",
];

pub fn changes_state(op: &Op) -> bool {
    !READS.contains(&op.name)
}

/// How to read what an op is about to change: the read op, the params it
/// takes from the change's params, and where in its result the one changed
/// item is (a list's field and the key that names the item).
struct Reader {
    op: &'static str,
    params: &'static [&'static str],
    pick: Option<(&'static str, &'static str)>,
}

fn reader(op: &str) -> Option<Reader> {
    let read = |op, params, pick| Some(Reader { op, params, pick });
    match op {
        "workspaces.rename" | "workspaces.delete" | "workspaces.sso.set" => {
            read("workspaces.get", &["workspace_id"], None)
        }
        "namespaces.delete" => read("namespaces.list", &["workspace_id"], Some(("namespaces", "name"))),
        "namespaces.keys.revoke" => read(
            "namespaces.keys.list",
            &["workspace_id", "namespace"],
            Some(("keys", "key_id")),
        ),
        "workspaces.package-policy.set" => read("workspaces.package-policy.get", &["workspace_id"], None),
        "workspaces.tool-policy.set" => read("workspaces.tool-policy.get", &["workspace_id"], None),
        "members.set-role" | "members.remove" => read("members.list", &["workspace_id"], Some(("members", "user_id"))),
        "keys.revoke" | "keys.set-tools" => read("keys.list", &["workspace_id"], Some(("keys", "key_id"))),
        "billing.plan.change" => read("billing.plan.get", &["workspace_id"], None),
        "billing.limits.set" => read("billing.limits.get", &["workspace_id"], None),
        "packages.yank" | "packages.unyank" | "packages.deprecate" => {
            read("packages.get", &["name"], Some(("versions", "version")))
        }
        "adapters.install" => read("adapters.list", &[], Some(("installs", "provider"))),
        "installs.update" | "installs.delete" | "guardrails.delete" => {
            read("installs.get", &["workspace_id", "name"], None)
        }
        "mcp_servers.delete" => read("mcp_servers.list", &["workspace_id"], Some(("servers", "name"))),
        "deployments.create" | "deployments.delete" => {
            read("deployments.get", &["workspace_id", "namespace", "name"], None)
        }
        _ => None,
    }
}

/// The state `op` is about to change, when there is one to read; `None`
/// for what is created, or when it cannot be read (it does not exist).
pub async fn before(control: &ControlPlane, ctx: &Ctx, op: &Op, params: &Value) -> Option<Value> {
    let reader = reader(op.name)?;
    let read = by_name(reader.op)?;
    let read_params: Map<String, Value> = reader
        .params
        .iter()
        .filter_map(|name| Some((name.to_string(), params.get(*name)?.clone())))
        .collect();
    let state = read.invoke(control, ctx, Value::Object(read_params)).await.ok()?;
    match reader.pick {
        None => Some(state),
        Some((list, key)) => state[list]
            .as_array()?
            .iter()
            .find(|item| item.get(key).is_some() && item.get(key) == params.get(key))
            .cloned(),
    }
}

/// Param and result fields that name what an op acted on.
const NAMING: &[&str] = &[
    "workspace_id",
    "user_id",
    "email",
    "key_id",
    "namespace",
    "name",
    "package",
    "version",
    "provider",
    "actor_id",
    "plan",
    "scope",
    "session_id",
];

/// The row for one run of `op`, or `None` when it is not recorded.
pub fn change(
    op: &Op,
    ctx: &Ctx,
    params: &Value,
    before: Option<Value>,
    outcome: &Result<Value, OpError>,
) -> Option<Change> {
    if !changes_state(op) {
        return None;
    }
    let actor = match (&ctx.caller, outcome) {
        (Some(caller), _) => audit_actor(caller),
        // A sign-up's new user made it.
        (None, Ok(result)) => Actor {
            user_id: result["user_id"].as_str().map(str::to_string),
            ..Actor::of_kind(ActorKind::Anonymous)
        },
        (None, Err(_)) => return None,
    };
    let result = outcome.as_ref().ok();
    let mut target = Map::new();
    for source in [Some(params), result] {
        for field in NAMING {
            if let Some(value) = source.and_then(|s| s.get(*field)).filter(|v| !v.is_null()) {
                target.entry(field.to_string()).or_insert_with(|| value.clone());
            }
        }
    }
    let workspace_id = ctx
        .scope
        .as_ref()
        .map(|scope| scope.workspace_id.clone())
        .or_else(|| result.and_then(|r| r["workspace_id"].as_str()).map(str::to_string))
        .or_else(|| ctx.caller.as_ref().map(|caller| caller.workspace_id.clone()));
    let mut change = Change::new(op.name, actor).ip(ctx.client_ip);
    change.workspace_id = workspace_id;
    change.target = (!target.is_empty()).then_some(Value::Object(target));
    change.params = Some(params.clone());
    change.before = before;
    match outcome {
        Ok(result) => change.after = Some(result.clone()),
        Err(error) => {
            let error = error.to_json();
            change.failure = Some(Failure {
                reason: error["reason"].as_str().unwrap_or("INTERNAL").to_string(),
                message: error["message"].as_str().unwrap_or_default().to_string(),
            });
        }
    }
    Some(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_is_a_registered_op_and_every_reader_reads() {
        for name in READS {
            assert!(by_name(name).is_some(), "READS lists unknown op {name}");
        }
        for op in super::super::registry::ops() {
            if let Some(reader) = reader(op.name) {
                assert!(changes_state(op), "{} reads before a read", op.name);
                assert!(READS.contains(&reader.op), "{} reads through {}", op.name, reader.op);
            }
        }
    }
}
