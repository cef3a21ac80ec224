//! The contract: every op gives the same result through SendMessage and through
//! its extension method (on SQLite and Postgres).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::helpers::*;
use crate::common::{Gateway, standard_config, start_mock};

fn normalize(value: &Value, seen: &mut HashMap<String, usize>, world: &str) -> Value {
    match value {
        Value::String(s) => {
            let hex = |t: &str, len: usize| t.len() == len && t.bytes().all(|b| b.is_ascii_hexdigit());
            // Keys, `<prefix>_<uuid>` ids, actor ids (content: they differ
            // with each world's namespace) and content digests.
            let generated = s.starts_with("tg_live_")
                || s.split_once('_').is_some_and(|(prefix, rest)| {
                    !prefix.is_empty() && prefix.bytes().all(|b| b.is_ascii_lowercase()) && hex(rest, 32)
                })
                || hex(s, 40)
                || s.strip_prefix("sha256:").is_some_and(|rest| hex(rest, 64));
            if generated {
                let next = seen.len();
                json!(format!("<id {}>", seen.entry(s.clone()).or_insert(next)))
            } else if s.contains('\'') {
                // Ids quoted inside an error message.
                let pieces: Vec<String> = s
                    .split('\'')
                    .map(|piece| match normalize(&json!(piece), seen, world) {
                        Value::String(p) => p,
                        _ => unreachable!(),
                    })
                    .collect();
                json!(pieces.join("'"))
            } else {
                json!(s.replace(world, "<world>"))
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| normalize(v, seen, world)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let timing = k.ends_with("_at") || k.ends_with("_ms");
                    let v = if timing && !v.is_null() {
                        json!("<time>")
                    } else {
                        normalize(v, seen, world)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Runs the whole op script in a fresh world through one path; returns the
/// normalized outcomes in order.
async fn script(gateway: &Gateway, world: &str, via_send: bool) -> Vec<(String, Value)> {
    let run = |key: Option<String>, op: &'static str, params: Value| {
        let key = key.clone();
        async move {
            if via_send {
                send(gateway, key.as_deref(), op, params).await
            } else {
                method(gateway, key.as_deref(), op, params).await
            }
        }
    };
    let mut log: Vec<(String, OpResult)> = Vec::new();
    let email = format!("owner-{world}@example.com");
    let account = run(None, "accounts.signup", json!({"name": "Owner", "email": email})).await;
    log.push(("accounts.signup".into(), account.clone()));
    let account = account.unwrap();
    let key = Some(account["api_key"].as_str().unwrap().to_string());
    let helper = signup(gateway, &format!("helper-{world}@example.com")).await;
    gateway.admin(&[
        "credit",
        "--workspace",
        account["workspace_id"].as_str().unwrap(),
        "--usd",
        "5",
    ]);
    let (status, _, chat) = chat_with(gateway, key.as_deref().unwrap()).await;
    assert_eq!(status, 200, "{chat}");
    let request_id = chat["service"]["request_id"].clone();

    let second = run(key.clone(), "workspaces.create", json!({"name": "second"})).await;
    let second_id = second.as_ref().unwrap()["workspace_id"].clone();
    log.push(("workspaces.create".into(), second));
    // An actor in this world's registry namespace, and the id it compiles to.
    let actor = format!(
        "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {{name: hello, namespace: pkg-{world}}}\n\
         models:\n  default: {{candidates: [mock/small]}}\n\
         steps:\n  - id: hi\n    llm: {{model: default, prompt: hello}}\n"
    );
    let actor_id = tollgate_actors::compile::parse(&actor)
        .unwrap()
        .compile(&tollgate_actors::compile::Resolutions::new())
        .unwrap()
        .id
        .to_string();
    let deployment = json!({"namespace": format!("pkg-{world}"), "name": "hello"});
    // One fixed signing key, so both worlds show the same key id.
    let signing_key = tollgate_registry::signing::parse_key_file(&format!(
        "tollgate-signing-key:{}",
        "CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk"
    ))
    .unwrap();
    let public = tollgate_registry::signing::PublicKey::of(&signing_key);
    let signing = json!({"namespace": format!("pkg-{world}"), "public_key": public.to_text(), "name": "ci"});
    let steps: Vec<(&'static str, Value)> = vec![
        ("workspaces.list", json!({})),
        ("workspaces.get", json!({})),
        (
            "workspaces.rename",
            json!({"workspace_id": second_id, "name": "renamed"}),
        ),
        ("workspaces.sso.set", json!({"required": true})),
        ("workspaces.sso.set", json!({"required": false})),
        ("namespaces.create", json!({"name": "team"})),
        ("namespaces.create", json!({"name": "team"})),
        ("namespaces.create", json!({"name": "Bad Name"})),
        ("namespaces.list", json!({})),
        (
            "members.add",
            json!({"email": format!("helper-{world}@example.com"), "role": "developer"}),
        ),
        ("members.list", json!({})),
        ("members.set-role", json!({"user_id": helper.user_id, "role": "viewer"})),
        ("members.remove", json!({"user_id": helper.user_id})),
        ("members.remove", json!({"user_id": account["user_id"]})),
        ("keys.create", json!({"name": "ci"})),
        ("keys.list", json!({})),
        ("wallet.get", json!({})),
        ("billing.plans.list", json!({})),
        ("billing.plan.get", json!({})),
        ("billing.plan.change", json!({"plan": "pro"})),
        ("billing.plan.change", json!({"plan": "no-such-plan"})),
        ("billing.plan.change", json!({"plan": "free"})),
        ("billing.usage.month", json!({})),
        ("billing.limits.get", json!({})),
        (
            "billing.limits.set",
            json!({"scope": "workspace", "period": "daily", "limit_usd": "1"}),
        ),
        ("billing.limits.set", json!({"scope": "key", "remove": true})),
        ("billing.topups.create", json!({"amount_usd": "25"})),
        ("billing.topups.list", json!({})),
        ("usage.list", json!({"limit": 10})),
        ("requests.get", json!({"request_id": request_id})),
        ("requests.get", json!({"request_id": "req_missing"})),
        // Registry namespaces are global: each world publishes in its own.
        ("namespaces.create", json!({"name": format!("pkg-{world}")})),
        ("namespaces.keys.add", signing.clone()),
        ("namespaces.keys.add", signing.clone()),
        ("namespaces.keys.list", json!({"namespace": format!("pkg-{world}")})),
        (
            "namespaces.keys.revoke",
            json!({"namespace": format!("pkg-{world}"), "key_id": public.key_id()}),
        ),
        ("namespaces.keys.list", json!({"namespace": "tollgate"})),
        ("workspaces.package-policy.get", json!({})),
        ("workspaces.tool-policy.get", json!({})),
        (
            "workspaces.tool-policy.set",
            json!({"role": "developer", "tools": ["calc", "fx__echo"]}),
        ),
        (
            "workspaces.tool-policy.set",
            json!({"role": "owner", "tools": ["calc"]}),
        ),
        (
            "workspaces.tool-policy.set",
            json!({"role": "developer", "tools": null}),
        ),
        ("workspaces.package-policy.set", json!({"require_signed": ["tollgate"]})),
        (
            "workspaces.package-policy.set",
            json!({"require_signed": ["Not A Namespace"]}),
        ),
        (
            "packages.search",
            json!({"kind": "provider-adapter", "q": "openai-compatible"}),
        ),
        ("packages.get", json!({"name": "tollgate/openai-compatible"})),
        ("packages.get", json!({"name": format!("pkg-{world}/nothing")})),
        (
            "packages.yank",
            json!({"name": format!("pkg-{world}/nothing"), "version": "1.0.0"}),
        ),
        (
            "packages.unyank",
            json!({"name": format!("pkg-{world}/nothing"), "version": "1.0.0"}),
        ),
        (
            "packages.deprecate",
            json!({"name": format!("pkg-{world}/nothing"), "version": "1.0.0", "message": "old"}),
        ),
        ("adapters.list", json!({})),
        (
            "adapters.install",
            json!({"provider": "mock", "package": "tollgate/openai-compatible", "version": "9.9.9"}),
        ),
        ("installs.create", json!({"package": "tollgate/calculator"})),
        ("installs.list", json!({})),
        ("installs.get", json!({"name": "calculator"})),
        (
            "installs.update",
            json!({"name": "calculator", "config": {"mode": "exact"}}),
        ),
        ("installs.delete", json!({"name": "calculator"})),
        (
            "guardrails.create",
            json!({"package": "tollgate/denylist", "guardrail": {"mode": "monitor"}}),
        ),
        (
            "guardrails.create",
            json!({"package": "tollgate/calculator", "name": "not-a-guard"}),
        ),
        ("guardrails.list", json!({})),
        ("guardrails.delete", json!({"name": "denylist"})),
        ("guardrails.delete", json!({"name": "denylist"})),
        (
            "mcp_servers.create",
            json!({"name": "remote", "url": "https://mcp.example.com/mcp",
                   "auth": {"header": "authorization", "value": "Bearer remote-secret-0123456789"}}),
        ),
        (
            "mcp_servers.create",
            json!({"name": "inside", "url": "http://127.0.0.1:9/mcp", "auth": "none"}),
        ),
        ("mcp_servers.list", json!({})),
        ("mcp_servers.delete", json!({"name": "remote"})),
        ("mcp_servers.delete", json!({"name": "remote"})),
        ("actors.compile", json!({"source": actor})),
        ("actors.compile", json!({"source": "kind: ["})),
        ("actors.publish", json!({"source": actor})),
        ("actors.get", json!({"id": actor_id})),
        ("actors.list", json!({})),
        (
            "deployments.create",
            json!({"namespace": format!("pkg-{world}"), "name": "hello", "actor_id": actor_id}),
        ),
        ("deployments.list", json!({})),
        ("deployments.get", deployment.clone()),
        ("deployments.delete", deployment.clone()),
        ("deployments.get", deployment.clone()),
        ("runs.get", json!({"run_id": "run_missing"})),
        // Rows differ between the worlds (seq, hash); `audited` checks them.
        ("audit.list", json!({"op": "no.such.op"})),
        ("audit.list", json!({"limit": 0})),
        // A token's secret and hint differ between worlds; tests/python/test_scim.py mints them.
        ("scim.tokens.create", json!({"group_roles": {"Admins": "owner"}})),
        ("scim.tokens.list", json!({})),
        ("scim.tokens.revoke", json!({"token_id": "scimtok_missing"})),
        ("packages.publish", json!({"manifest": {}, "content_base64": ""})),
        ("namespaces.delete", json!({"name": "team"})),
        ("workspaces.get", json!({"workspace_id": helper.workspace_id})),
        ("workspaces.delete", json!({"workspace_id": second_id})),
        ("workspaces.get", json!({"workspace_id": second_id})),
    ];
    let mut created_key = None;
    for (op, params) in steps {
        let outcome = run(key.clone(), op, params).await;
        if op == "keys.create" {
            created_key = outcome.as_ref().ok().map(|k| k["key_id"].clone());
        }
        log.push((op.into(), outcome));
    }
    let created_key = created_key.unwrap();
    let tools = json!({"key_id": created_key, "tools": ["calc"]});
    log.push(("keys.set-tools".into(), run(key.clone(), "keys.set-tools", tools).await));
    let revoked = run(key.clone(), "keys.revoke", json!({"key_id": created_key})).await;
    log.push(("keys.revoke".into(), revoked));
    let mut seen = HashMap::new();
    log.into_iter()
        .map(|(op, outcome)| {
            let value = match outcome {
                Ok(v) => json!({"ok": v}),
                Err((reason, message)) => json!({"error": reason, "message": message}),
            };
            (op, normalize(&value, &mut seen, world))
        })
        .collect()
}

#[tokio::test]
async fn every_op_answers_the_same_through_send_message_and_its_extension_method() {
    let gateway = gateway().await;
    let url = tollgate_core::db::sqlite_url(&gateway.dir.path().join("data").join("tollgate.db"));
    contract(gateway, &url).await;
}

#[tokio::test]
async fn the_contract_holds_on_postgres() {
    let Some(schema) = crate::common::PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let config = format!("database_url = \"{}\"\n{}", schema.url, standard_config(mock, EXTRA));
    contract(Gateway::start(&config).await, &schema.url).await;
}

async fn contract(gateway: Gateway, database_url: &str) {
    let by_send = script(&gateway, "alpha", true).await;
    let by_method = script(&gateway, "beta", false).await;
    assert_eq!(by_send.len(), by_method.len());
    for ((op, a), (_, b)) in by_send.iter().zip(&by_method) {
        assert_eq!(a, b, "{op} differs between SendMessage and its extension method");
    }
    // Every registered op ran, and the script exercised successes and errors.
    let card: Value = reqwest::get(format!("{}/.well-known/agent-card.json", gateway.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ops = card["capabilities"]["extensions"][0]["params"]["operations"]
        .as_array()
        .unwrap();
    audited(&gateway, database_url, ops, &by_send).await;
    for op in ops {
        let name = op["op"].as_str().unwrap();
        assert!(
            by_send.iter().any(|(o, _)| o == name),
            "the contract script misses {name}"
        );
    }
    let outcome = |op: &str, n: usize| by_send.iter().filter(|(o, _)| o == op).nth(n).unwrap().1.clone();
    assert_eq!(outcome("namespaces.create", 1)["error"], "ALREADY_EXISTS");
    assert_eq!(outcome("namespaces.create", 2)["error"], "INVALID_PARAMS");
    assert_eq!(outcome("members.remove", 1)["error"], "FAILED_PRECONDITION");
    assert_eq!(
        outcome("workspaces.sso.set", 0)["error"],
        "FAILED_PRECONDITION",
        "Free has no SSO enforcement"
    );
    assert_eq!(outcome("workspaces.sso.set", 1)["ok"]["require_sso"], false);
    assert_eq!(outcome("requests.get", 1)["error"], "NOT_FOUND");
    assert_eq!(
        outcome("workspaces.get", 1)["error"],
        "NOT_FOUND",
        "another user's workspace is hidden"
    );
    assert_eq!(
        outcome("workspaces.get", 2)["error"],
        "NOT_FOUND",
        "a deleted workspace is gone"
    );
    let trace = &outcome("requests.get", 0)["ok"];
    assert_eq!(trace["outcome"], "success", "{trace}");
    assert!(trace["attempts"].is_array(), "{trace}");
    assert_eq!(outcome("usage.list", 0)["ok"]["entries"].as_array().unwrap().len(), 1);
    assert_eq!(outcome("wallet.get", 0)["ok"]["plan"], "free");
    let plans = outcome("billing.plans.list", 0)["ok"]["plans"].clone();
    let ids: Vec<&str> = plans
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["business", "enterprise", "free", "pro", "team"]);
    assert_eq!(outcome("billing.plan.get", 0)["ok"]["plan"]["monthly_requests"], 1000);
    assert_eq!(
        outcome("billing.plan.change", 0)["error"],
        "FAILED_PRECONDITION",
        "a paid plan needs a payment (or an operator)"
    );
    assert_eq!(outcome("billing.plan.change", 1)["error"], "INVALID_PARAMS");
    assert_eq!(outcome("billing.plan.change", 2)["ok"]["plan"]["id"], "free");
    assert_eq!(
        outcome("billing.topups.create", 0)["error"],
        "FAILED_PRECONDITION",
        "this gateway has no payment processor"
    );
    assert_eq!(outcome("billing.topups.list", 0)["ok"]["checkouts"], json!([]));
    assert_eq!(outcome("billing.topups.list", 0)["ok"]["topup_hold"], Value::Null);
    let month = &outcome("billing.usage.month", 0)["ok"];
    assert_eq!(month["requests"], 1, "{month}");
    assert_eq!(month["remaining"], 999, "{month}");
    assert_eq!(month["fee_usd"], "0.000000000", "{month}");
    let limits = &outcome("billing.limits.get", 0)["ok"];
    assert_eq!(
        (&limits["spend_controls"], &limits["workspace"], &limits["keys"]),
        (&json!(false), &Value::Null, &json!([])),
        "{limits}"
    );
    assert_eq!(
        outcome("billing.limits.set", 0)["error"],
        "FAILED_PRECONDITION",
        "Free has no spend controls"
    );
    assert_eq!(outcome("billing.limits.set", 1)["error"], "INVALID_PARAMS");
    assert_eq!(outcome("packages.get", 0)["ok"]["name"], "tollgate/openai-compatible");
    assert_eq!(
        outcome("audit.list", 0)["ok"],
        json!({"entries": [], "next_cursor": null})
    );
    assert_eq!(outcome("audit.list", 1)["error"], "INVALID_PARAMS");
    assert_eq!(
        outcome("scim.tokens.create", 0)["error"],
        "INVALID_PARAMS",
        "SCIM never grants owner"
    );
    assert_eq!(outcome("scim.tokens.list", 0)["ok"]["tokens"], json!([]));
    assert_eq!(outcome("scim.tokens.revoke", 0)["error"], "NOT_FOUND");
    assert_eq!(outcome("packages.yank", 0)["error"], "NOT_FOUND");
    assert_eq!(
        outcome("adapters.install", 0)["error"],
        "PERMISSION_DENIED",
        "only operators install adapters"
    );
    assert_eq!(
        outcome("installs.get", 0)["ok"]["tools"],
        json!(["calculator__evaluate"])
    );
    assert_eq!(outcome("namespaces.keys.add", 0)["ok"]["name"], "ci");
    assert_eq!(outcome("namespaces.keys.add", 1)["error"], "ALREADY_EXISTS");
    assert_eq!(
        outcome("namespaces.keys.list", 0)["ok"]["keys"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(outcome("namespaces.keys.revoke", 0)["ok"]["revoked_at_ms"], "<time>");
    assert_eq!(
        outcome("namespaces.keys.list", 1)["error"],
        "NOT_FOUND",
        "no workspace manages the built-in namespace's keys"
    );
    assert_eq!(
        outcome("workspaces.package-policy.get", 0)["ok"]["require_signed"],
        json!([])
    );
    assert_eq!(outcome("workspaces.package-policy.set", 1)["error"], "INVALID_PARAMS");
    assert_eq!(
        outcome("workspaces.tool-policy.set", 0)["ok"]["roles"]["developer"],
        json!(["calc", "fx__echo"])
    );
    assert_eq!(outcome("workspaces.tool-policy.set", 1)["error"], "INVALID_PARAMS");
    assert_eq!(outcome("workspaces.tool-policy.set", 2)["ok"]["roles"], json!({}));
    // Under a policy requiring the built-ins to be signed, they install.
    let installed = &outcome("installs.create", 0)["ok"];
    assert_eq!(installed["signature"]["verified"], true, "{installed}");
    assert_eq!(installed["signature"]["namespace"], "tollgate", "{installed}");
}

/// The ops that change nothing, listed here apart from the gateway's own list
/// (`host/control/src/audit.rs`), so a change wrongly listed there as a read
/// fails this test.
const READS: &[&str] = &[
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

/// Walks the card's op list: each run of an op that changes state (both
/// worlds ran the script, every step with a key) left exactly one audit
/// row, with its outcome; reads left none; no row holds a secret; the chain
/// verifies, and tampering with one row makes `admin audit-verify` fail.
async fn audited(gateway: &Gateway, database_url: &str, ops: &[Value], script: &[(String, Value)]) {
    let database = tollgate_core::db::Database::open(database_url, Default::default())
        .await
        .unwrap();
    let rows: Vec<(String, String, Option<String>, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT op, outcome, params, before, after FROM audit_log ORDER BY seq")
            .fetch_all(&database.pool)
            .await
            .unwrap();
    for op in ops {
        let name = op["op"].as_str().unwrap();
        let runs: Vec<&Value> = script.iter().filter(|(o, _)| o == name).map(|(_, v)| v).collect();
        let logged: Vec<&str> = rows.iter().filter(|r| r.0 == name).map(|r| r.1.as_str()).collect();
        if READS.contains(&name) {
            assert!(
                logged.is_empty(),
                "{name} changes nothing but left {} audit rows",
                logged.len()
            );
            continue;
        }
        // The helper's sign-up in each world is one more.
        let extra = usize::from(name == "accounts.signup");
        assert_eq!(logged.len(), 2 * (runs.len() + extra), "{name}: one audit row per run");
        let failed = runs.iter().filter(|run| run.get("error").is_some()).count();
        assert_eq!(
            logged.iter().filter(|o| **o == "error").count(),
            2 * failed,
            "{name}: each failed run is recorded as one"
        );
    }
    let text = format!("{rows:?}");
    let secret = regex_lite_find_key(&text);
    assert!(secret.is_none(), "an audit row holds a key: {secret:?}");
    assert!(text.contains("[redacted]"), "minted keys are recorded redacted");
    assert!(
        !text.contains("remote-secret"),
        "a remote MCP server's credential is recorded redacted"
    );
    let revoke = rows.iter().find(|r| r.0 == "keys.revoke").unwrap();
    assert!(
        revoke.3.as_deref().unwrap().contains("key_id"),
        "before: {:?}",
        revoke.3
    );
    let verified = gateway.admin(&["audit-verify"]);
    assert!(verified.contains("audit log verified"), "{verified}");
    sqlx::query(
        "UPDATE audit_log SET op = 'keys.list' WHERE seq = (SELECT MIN(seq) FROM audit_log WHERE op = 'keys.revoke')",
    )
    .execute(&database.pool)
    .await
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["admin", "audit-verify", "--config"])
        .arg(&gateway.config_path)
        .output()
        .unwrap();
    assert!(!output.status.success(), "a changed row fails verification");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("does not match its hash"), "{stderr}");
}

/// A full key (`tg_live_` and its random part, not a shortened hint).
fn regex_lite_find_key(text: &str) -> Option<String> {
    text.match_indices("tg_live_").find_map(|(at, _)| {
        let rest: String = text[at + 8..].chars().take_while(char::is_ascii_alphanumeric).collect();
        (rest.len() >= 16).then(|| format!("tg_live_{rest}"))
    })
}
