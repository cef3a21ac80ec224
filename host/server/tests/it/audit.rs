//! The admin audit log (docs/audit.md) beyond the op walk in the contract
//! test: sign-ins with the client's address, operator commands, credentials
//! never kept, who may read it and how it pages, export to the sinks as
//! CloudEvents, and retention that keeps the chain whole.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::control_plane::helpers::{EXTRA, method, signup};

async fn gateway() -> Gateway {
    let mock = start_mock(Default::default()).await;
    Gateway::start(&standard_config(mock, EXTRA)).await
}

async fn audit(gateway: &Gateway, key: &str, params: Value) -> Vec<Value> {
    let page = method(gateway, Some(key), "audit.list", params).await.unwrap();
    page["entries"].as_array().unwrap().clone()
}

async fn table_text(gateway: &Gateway) -> String {
    let url = tollgate_core::db::sqlite_url(&gateway.dir.path().join("data").join("tollgate.db"));
    let database = tollgate_core::db::Database::open(&url, Default::default())
        .await
        .unwrap();
    let rows: Vec<(String, Option<String>, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT op, params, before, after FROM audit_log ORDER BY seq")
            .fetch_all(&database.pool)
            .await
            .unwrap();
    format!("{rows:?}")
}

#[tokio::test]
async fn sign_ins_operator_changes_and_credentials_are_recorded_without_secrets() {
    let gateway = gateway().await;
    let key = gateway.api_key.clone();
    let signed_in = gateway
        .http
        .post(format!("{}/auth/session", gateway.url))
        .json(&json!({"api_key": key}))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 201);
    gateway.admin(&["credit", "--workspace", &gateway.workspace_id, "--usd", "2.5"]);
    const SECRET: &str = "sekrit-credential-value-0123456789";
    let _ = method(
        &gateway,
        Some(&key),
        "installs.create",
        json!({"package": "tollgate/calculator", "name": "calc",
               "credentials": {"token": {"value": SECRET, "placement": "bearer"}}}),
    )
    .await;

    let rows = audit(&gateway, &key, json!({})).await;
    let ops: Vec<&str> = rows.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(
        ops,
        ["installs.create", "admin.credit", "auth.signin", "admin.create-account"],
        "newest first"
    );
    let signin = &rows[2];
    assert_eq!(signin["actor"]["kind"], "key");
    assert!(
        signin["actor"]["key_id"].as_str().unwrap().starts_with("key_"),
        "{signin}"
    );
    assert_eq!(signin["ip"], "127.0.0.1");
    assert_eq!(signin["target"]["method"], "key");
    assert_eq!(rows[1]["actor"]["kind"], "operator");
    assert_eq!(rows[1]["after"]["credited_usd"], "2.500000000");
    assert_eq!(rows[3]["after"]["api_key"], "[redacted]");
    let table = table_text(&gateway).await;
    assert!(!table.contains(SECRET), "a credential reached the audit log: {table}");
    assert!(!table.contains(&key), "a key reached the audit log");

    // Filters and pages.
    let credits = audit(&gateway, &key, json!({"op": "admin.credit"})).await;
    assert_eq!(credits.len(), 1);
    let first = method(&gateway, Some(&key), "audit.list", json!({"limit": 2}))
        .await
        .unwrap();
    let cursor = first["next_cursor"].as_str().unwrap().to_string();
    let second = audit(&gateway, &key, json!({"limit": 2, "cursor": cursor})).await;
    let seqs: Vec<i64> = first["entries"]
        .as_array()
        .unwrap()
        .iter()
        .chain(&second)
        .map(|r| r["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 4);
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "{seqs:?}");
    let by_key = audit(&gateway, &key, json!({"actor": signin["actor"]["key_id"]})).await;
    assert_eq!(by_key.len(), 2, "the sign-in and the install");

    // Owners and admins read it; a developer may not.
    let developer = signup(&gateway, "dev-audit@example.com").await;
    method(
        &gateway,
        Some(&key),
        "members.add",
        json!({"email": "dev-audit@example.com", "role": "developer"}),
    )
    .await
    .unwrap();
    let refused = method(
        &gateway,
        Some(&developer.key),
        "audit.list",
        json!({"workspace_id": gateway.workspace_id}),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.0, "PERMISSION_DENIED");
    // The developer's own workspace's log is theirs alone.
    let own = audit(&gateway, &developer.key, json!({})).await;
    assert!(own.iter().all(|r| r["workspace_id"] == json!(developer.workspace_id)));
}

#[tokio::test]
async fn rows_are_exported_as_cloudevents_and_archived_behind_the_anchor() {
    let gateway = gateway().await;
    let key = gateway.api_key.clone();
    let created = method(&gateway, Some(&key), "keys.create", json!({"name": "exported"}))
        .await
        .unwrap();
    let events_file = gateway.dir.path().join("data").join("events").join("usage.jsonl");
    let deadline = Instant::now() + Duration::from_secs(20);
    let event = loop {
        let text = std::fs::read_to_string(&events_file).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|event| event["type"] == "dev.tollgate.audit.v1" && event["data"]["op"] == "keys.create");
        if let Some(event) = found {
            break event;
        }
        assert!(Instant::now() < deadline, "no audit event in {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(event["specversion"], "1.0");
    assert_eq!(event["id"], event["data"]["hash"]);
    assert_eq!(event["subject"], json!(gateway.workspace_id));
    assert_eq!(event["data"]["after"]["key_id"], created["key_id"]);
    assert_eq!(event["data"]["after"]["api_key"], "[redacted]");
    let schema: Value = gateway
        .get("/schemas/audit.v1.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(schema["$id"], "urn:tollgate:schema:audit:v1");
    assert!(
        event["dataschema"]
            .as_str()
            .unwrap()
            .ends_with("/schemas/audit.v1.json")
    );

    // A year and a day on, what every sink has is archived; the chain
    // verifies from its anchor, and goes on.
    let later = (chrono::Utc::now() + chrono::Duration::days(366)).to_rfc3339();
    // Only what every sink has is archived, and the sink may take a moment
    // to get the `keys.create` row: archive until a file holds it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let report: Value = serde_json::from_str(&gateway.admin(&["archive", "--as-of", &later])).unwrap();
        let archived: Vec<String> = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f.as_str().filter(|f| f.starts_with("audit_log/")))
            .map(|file| {
                let bytes = std::fs::read(gateway.dir.path().join("data").join("archive").join(file)).unwrap();
                String::from_utf8(zstd::decode_all(bytes.as_slice()).unwrap()).unwrap()
            })
            .collect();
        if let Some(lines) = archived
            .into_iter()
            .find(|lines| lines.contains("\"op\":\"keys.create\""))
        {
            break lines;
        }
        assert!(Instant::now() < deadline, "keys.create never archived: {report}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(lines.contains("\"op\":\"keys.create\""), "{lines}");
    assert!(gateway.admin(&["audit-verify"]).contains("audit log verified"));
    method(&gateway, Some(&key), "keys.create", json!({"name": "after"}))
        .await
        .unwrap();
    let verified: Value = serde_json::from_str(&gateway.admin(&["audit-verify", "--json"])).unwrap();
    assert_eq!(verified["broken"], Value::Null, "{verified}");
    assert!(verified["anchor_seq"].as_i64().unwrap() >= 2, "{verified}");
    assert!(verified["rows"].as_i64().unwrap() >= 1, "{verified}");
}
