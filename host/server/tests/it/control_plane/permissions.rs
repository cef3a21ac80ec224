//! The permission matrix and key lifecycle as the data plane sees it.

use serde_json::{Value, json};

use super::helpers::*;
use crate::common::Gateway;

/// Expected outcome of each workspace op for owner, admin, developer, viewer
/// (the table in docs/control-plane.md, written out independently).
const MATRIX: &[(&str, [bool; 4])] = &[
    ("workspaces.get", [true, true, true, true]),
    ("workspaces.rename", [true, true, false, false]),
    ("namespaces.create", [true, true, true, false]),
    ("namespaces.list", [true, true, true, true]),
    // Registry writes need namespace.write in a workspace owning the namespace.
    ("packages.yank", [true, true, true, false]),
    ("packages.unyank", [true, true, true, false]),
    ("packages.deprecate", [true, true, true, false]),
    ("namespaces.delete", [true, true, true, false]),
    // Signing keys of the workspace's namespaces, and its package policy.
    ("namespaces.keys.add", [true, true, true, false]),
    ("namespaces.keys.list", [true, true, true, true]),
    ("namespaces.keys.revoke", [true, true, true, false]),
    ("workspaces.package-policy.get", [true, true, true, true]),
    // Owners and admins decide what installs must be signed (policy.write).
    ("workspaces.package-policy.set", [true, true, false, false]),
    ("workspaces.tool-policy.get", [true, true, true, true]),
    // Owners and admins decide what a role's keys may reach over MCP.
    ("workspaces.tool-policy.set", [true, true, false, false]),
    ("members.add", [true, true, false, false]),
    ("members.list", [true, true, true, true]),
    ("members.set-role", [true, true, false, false]),
    ("members.remove", [true, true, false, false]),
    ("keys.create", [true, true, true, false]),
    ("keys.list", [true, true, true, true]),
    ("keys.revoke", [true, true, true, false]),
    ("keys.set-tools", [true, true, true, false]),
    ("wallet.get", [true, true, true, true]),
    ("billing.plan.get", [true, true, true, true]),
    ("billing.usage.month", [true, true, true, true]),
    // Only owners change the plan (billing.write).
    ("billing.plan.change", [true, false, false, false]),
    ("billing.limits.get", [true, true, true, true]),
    // Owners and admins set and remove budgets (budget.write).
    ("billing.limits.set", [true, true, false, false]),
    ("usage.list", [true, true, true, true]),
    ("requests.get", [true, true, true, true]),
    ("installs.create", [true, true, true, false]),
    ("installs.list", [true, true, true, true]),
    ("installs.get", [true, true, true, true]),
    ("installs.update", [true, true, true, false]),
    ("installs.delete", [true, true, true, false]),
    // Last: only the owner may, and then the workspace is gone.
    ("workspaces.delete", [true, false, false, false]),
];

fn matrix_params(op: &str, role: &str, workspace_id: &str) -> Value {
    let mut params = match op {
        "workspaces.rename" => json!({"name": format!("by-{role}")}),
        "namespaces.create" => json!({"name": format!("ns-{role}")}),
        "namespaces.delete" => json!({"name": "missing"}),
        "namespaces.keys.add" => json!({"namespace": "missing", "public_key": "x"}),
        "namespaces.keys.list" => json!({"namespace": "missing"}),
        "namespaces.keys.revoke" => json!({"namespace": "missing", "key_id": "0123456789abcdef"}),
        "workspaces.package-policy.set" => json!({"require_signed": []}),
        "workspaces.tool-policy.set" => json!({"role": "developer", "tools": null}),
        "members.add" => json!({"email": "nobody@example.com", "role": "viewer"}),
        "members.set-role" => json!({"user_id": "user_missing", "role": "viewer"}),
        "members.remove" => json!({"user_id": "user_missing"}),
        "keys.create" => json!({"name": format!("by-{role}")}),
        "keys.revoke" => json!({"key_id": "key_missing"}),
        "keys.set-tools" => json!({"key_id": "key_missing", "tools": null}),
        "requests.get" => json!({"request_id": "req_missing"}),
        "billing.plan.change" => json!({"plan": "free"}),
        "billing.limits.set" => json!({"scope": "key", "key_id": "key_missing", "remove": true}),
        "installs.create" => json!({"package": "tollgate/calculator", "name": format!("calc-{role}")}),
        "installs.get" | "installs.update" | "installs.delete" => json!({"name": "missing"}),
        // ns-developer exists by now (namespaces.create ran for each role).
        "packages.yank" | "packages.unyank" => json!({"name": "ns-developer/nothing", "version": "1.0.0"}),
        "packages.deprecate" => json!({"name": "ns-developer/nothing", "version": "1.0.0", "message": "old"}),
        _ => json!({}),
    };
    params["workspace_id"] = json!(workspace_id);
    params
}

/// Whose key each role may revoke, by the key creator's role (the rules in
/// docs/control-plane.md, "Keys"): `[owner's, admin's, developer's]`.
const REVOKE_MATRIX: &[(&str, [bool; 3])] = &[
    ("owner", [true, true, true]),
    ("admin", [false, true, true]),
    ("developer", [false, false, true]),
    ("viewer", [false, false, false]),
];

#[tokio::test]
async fn keys_revoke_every_role_against_every_other_members_key() {
    let gateway = gateway().await;
    let owner = signup(&gateway, "owner@revoke.test").await;
    let workspace = owner.workspace_id.clone();
    let mut members = vec![("owner", owner.key.clone())];
    for role in ["admin", "developer", "viewer"] {
        let user = signup(&gateway, &format!("{role}@revoke.test")).await;
        method(
            &gateway,
            Some(&owner.key),
            "members.add",
            json!({"email": format!("{role}@revoke.test"), "role": role}),
        )
        .await
        .unwrap();
        members.push((role, user.key));
    }
    gateway.admin(&["credit", "--workspace", &workspace, "--usd", "5"]);
    let key_of = |role: &str| members.iter().find(|(r, _)| *r == role).unwrap().1.clone();
    for (revoker, allowed) in REVOKE_MATRIX {
        for (index, creator) in ["owner", "admin", "developer"].iter().enumerate() {
            // A fresh key in the shared workspace, made by `creator`.
            let made = method(
                &gateway,
                Some(&key_of(creator)),
                "keys.create",
                json!({"workspace_id": workspace, "name": format!("{creator}-for-{revoker}")}),
            )
            .await
            .unwrap();
            let key_id = made["key_id"].as_str().unwrap();
            let outcome = method(
                &gateway,
                Some(&key_of(revoker)),
                "keys.revoke",
                json!({"workspace_id": workspace, "key_id": key_id}),
            )
            .await;
            match (allowed[index], outcome) {
                (true, Ok(revoked)) => assert_eq!(revoked["key_id"], key_id),
                (false, Err((reason, _))) => {
                    assert_eq!(reason, "PERMISSION_DENIED", "{revoker} revoking {creator}'s key")
                }
                (expected, outcome) => {
                    panic!("{revoker} revoking {creator}'s key: expected {expected}, got {outcome:?}")
                }
            }
            // A refused revocation leaves the key working.
            if !allowed[index] {
                let (status, _, _) = chat_with(&gateway, made["api_key"].as_str().unwrap()).await;
                assert_eq!(status, 200, "{creator}'s key still works after {revoker} was refused");
            }
        }
    }
}

#[tokio::test]
async fn permission_matrix_every_op_every_role_own_and_other_workspace() {
    let gateway = gateway().await;
    let owner = signup(&gateway, "owner@matrix.test").await;
    let workspace = owner.workspace_id.clone();
    let mut callers = vec![("owner", owner.key.clone())];
    for role in ["admin", "developer", "viewer"] {
        let user = signup(&gateway, &format!("{role}@matrix.test")).await;
        method(
            &gateway,
            Some(&owner.key),
            "members.add",
            json!({"email": format!("{role}@matrix.test"), "role": role}),
        )
        .await
        .unwrap();
        callers.push((role, user.key));
    }
    let stranger = signup(&gateway, "stranger@matrix.test").await;

    for (op, allowed) in MATRIX {
        // Owner last, so the owner's workspaces.delete ends the run.
        for (index, (role, key)) in callers.iter().enumerate().rev() {
            let outcome = method(&gateway, Some(key), op, matrix_params(op, role, &workspace)).await;
            match (allowed[index], &outcome) {
                (true, Ok(_)) => {}
                (true, Err((reason, message))) => assert!(
                    reason == "NOT_FOUND" && !message.contains("workspace"),
                    "{op} as {role}: expected success or a missing object, got {reason}: {message}"
                ),
                (false, Err((reason, _))) => assert_eq!(reason, "PERMISSION_DENIED", "{op} as {role}"),
                (false, Ok(result)) => panic!("{op} as {role} should be denied, got {result}"),
            }
        }
        // A key from another workspace learns nothing, whatever the op.
        let hidden = method(
            &gateway,
            Some(&stranger.key),
            op,
            matrix_params(op, "stranger", &workspace),
        )
        .await;
        let (reason, message) = hidden.expect_err(op);
        assert_eq!(reason, "NOT_FOUND", "{op} from another workspace");
        assert!(message.contains(&workspace), "{op}: {message}");
    }

    // Deleting the workspace revoked the keys that lived in it.
    let (status, _) = post(
        &gateway,
        Some(&owner.key),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "workspaces/list"}),
    )
    .await;
    assert_eq!(status, 401);
    // Ops that need a key but no workspace role, and the one that needs neither.
    for (role, key) in &callers[1..] {
        let list = method(&gateway, Some(key), "workspaces.list", json!({})).await.unwrap();
        assert!(list["workspaces"].is_array(), "{role}");
        method(&gateway, Some(key), "workspaces.create", json!({"name": "mine"}))
            .await
            .unwrap();
    }
    for op in ["workspaces.list", "workspaces.create", "keys.list", "wallet.get"] {
        let params = if op == "workspaces.create" {
            json!({"name": "x"})
        } else {
            json!({})
        };
        let (reason, _) = method(&gateway, None, op, params).await.unwrap_err();
        assert_eq!(reason, "UNAUTHENTICATED", "{op}");
    }
}

#[tokio::test]
async fn control_plane_keys_work_at_once_and_die_at_once() {
    let gateway = gateway().await;
    let owner = signup(&gateway, "keys-owner@example.com").await;
    gateway.admin(&["credit", "--workspace", &owner.workspace_id, "--usd", "5"]);
    let created = method(&gateway, Some(&owner.key), "keys.create", json!({"name": "ci"}))
        .await
        .unwrap();
    let secret = created["api_key"].as_str().unwrap();
    assert!(created["hint"].as_str().unwrap().ends_with(&secret[secret.len() - 4..]));
    let (status, _, body) = chat_with(&gateway, secret).await;
    assert_eq!(status, 200, "{body}");
    let listed = method(&gateway, Some(&owner.key), "keys.list", json!({}))
        .await
        .unwrap();
    assert!(
        !listed.to_string().contains(secret),
        "keys.list must never show a secret"
    );

    method(
        &gateway,
        Some(&owner.key),
        "keys.revoke",
        json!({"key_id": created["key_id"]}),
    )
    .await
    .unwrap();
    let (status, _, body) = chat_with(&gateway, secret).await;
    assert_eq!(status, 401, "{body}");

    // A role change reaches the data plane at once too: a viewer may not infer.
    let dev = signup(&gateway, "keys-dev@example.com").await;
    method(
        &gateway,
        Some(&owner.key),
        "members.add",
        json!({"email": "keys-dev@example.com", "role": "developer"}),
    )
    .await
    .unwrap();
    let dev_key = method(
        &gateway,
        Some(&dev.key),
        "keys.create",
        json!({"workspace_id": owner.workspace_id}),
    )
    .await
    .unwrap();
    let dev_secret = dev_key["api_key"].as_str().unwrap();
    assert_eq!(chat_with(&gateway, dev_secret).await.0, 200);
    method(
        &gateway,
        Some(&owner.key),
        "members.set-role",
        json!({"user_id": dev.user_id, "role": "viewer"}),
    )
    .await
    .unwrap();
    let (status, _, body) = chat_with(&gateway, dev_secret).await;
    assert_eq!(status, 403, "{body}");
    method(
        &gateway,
        Some(&owner.key),
        "members.remove",
        json!({"user_id": dev.user_id}),
    )
    .await
    .unwrap();
    assert_eq!(chat_with(&gateway, dev_secret).await.0, 401);
    // A revoked or unknown key on the control plane is refused as a whole.
    let (status, body) = post(
        &gateway,
        Some(secret),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "keys/list"}),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(rpc_error(&body["error"]).0, "UNAUTHENTICATED");
}

/// Every task `key` can list (with artifacts), as one JSON text.
async fn listed_tasks(gateway: &Gateway, key: &str) -> String {
    let (status, body) = post(
        gateway,
        Some(key),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"includeArtifacts": true}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["result"]["tasks"].is_array(), "{body}");
    body["result"]["tasks"].to_string()
}

#[tokio::test]
async fn the_task_store_keeps_no_secret_and_shows_tasks_only_to_the_scope_that_made_them() {
    let gateway = gateway().await;
    let owner = signup(&gateway, "tasks-owner@example.com").await;
    // A second workspace of the same user, with a task of its own.
    let other = method(
        &gateway,
        Some(&owner.key),
        "workspaces.create",
        json!({"name": "elsewhere"}),
    )
    .await
    .unwrap();
    let other_ws = other["workspace_id"].as_str().unwrap();
    let elsewhere = send(
        &gateway,
        Some(&owner.key),
        "keys.create",
        json!({"workspace_id": other_ws, "name": "elsewhere", "scope": "user"}),
    )
    .await
    .unwrap();
    let elsewhere_secret = elsewhere["api_key"].as_str().unwrap().to_string();

    // The creating call's answer shows the secret once.
    let confined = send(
        &gateway,
        Some(&owner.key),
        "keys.create",
        json!({"name": "confined", "scope": "workspace"}),
    )
    .await
    .unwrap();
    let confined_secret = confined["api_key"].as_str().unwrap().to_string();
    assert!(confined_secret.starts_with("tg_live_"));

    // Read back, neither secret is there: not to the user, with artifacts.
    let everything = listed_tasks(&gateway, &owner.key).await;
    assert!(everything.contains("keys.create"), "{everything}");
    assert!(!everything.contains(&confined_secret), "{everything}");
    assert!(!everything.contains(&elsewhere_secret), "{everything}");
    assert!(everything.contains("[redacted]"), "{everything}");

    // The confined key sees only tasks made by keys confined to its workspace.
    assert_eq!(listed_tasks(&gateway, &confined_secret).await, "[]");
    let mine = send(&gateway, Some(&confined_secret), "keys.list", json!({}))
        .await
        .unwrap();
    assert!(mine["keys"].is_array());
    let seen = listed_tasks(&gateway, &confined_secret).await;
    assert!(seen.contains("keys.list") && !seen.contains("keys.create"), "{seen}");
    assert!(!seen.contains(other_ws), "{seen}");
}

#[tokio::test]
async fn a_namespace_is_one_workspaces_and_nobody_else_deploys_under_it() {
    let gateway = gateway().await;
    let holder = signup(&gateway, "ns-holder@example.com").await;
    let squatter = signup(&gateway, "ns-squatter@example.com").await;
    method(
        &gateway,
        Some(&holder.key),
        "namespaces.create",
        json!({"name": "acme"}),
    )
    .await
    .unwrap();
    // Deployment URLs are keyed by the name alone, so a second workspace may
    // not create it in its own workspace either.
    let (reason, message) = method(
        &gateway,
        Some(&squatter.key),
        "namespaces.create",
        json!({"name": "acme"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "ALREADY_EXISTS", "{message}");
    assert!(message.contains("another workspace"), "{message}");
    // The gateway's own names are taken too.
    let (reason, _) = method(
        &gateway,
        Some(&squatter.key),
        "namespaces.create",
        json!({"name": "tollgate"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "ALREADY_EXISTS");
    let (reason, message) = method(
        &gateway,
        Some(&squatter.key),
        "deployments.create",
        json!({"namespace": "acme", "name": "bot", "actor_id": "0".repeat(40)}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "PERMISSION_DENIED", "{message}");
    assert!(message.contains("not this workspace's"), "{message}");
}
