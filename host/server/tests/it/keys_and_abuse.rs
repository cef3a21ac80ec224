//! Keys and abuse limits against the real binary: revocation, role changes and
//! removals reach a second gateway on the same Postgres within a second (also
//! when its listening connection is cut); keys scoped to one workspace; per-key
//! request rates (429 + `Retry-After`); per-client sign-up budgets that invalid
//! input does not spend; the namespace limit and the blob-upload quota.

use crate::common;
use crate::control_plane::helpers;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::{Gateway, PgSchema, assert_error_shape, standard_config, start_mock};
use helpers::{EXTRA, chat_with, method, signup};
use serde_json::{Value, json};

/// Polls `gateway` with `key` until a chat answers `status`; returns how long
/// that took, or panics after `limit`.
async fn until_status(gateway: &Gateway, key: &str, status: u16, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let (got, _, body) = chat_with(gateway, key).await;
        if got == status {
            eprintln!("{status} after {:?}", start.elapsed());
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "still {got} after {:?}, expected {status}: {body}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The key-change listeners' connections of the gateways on `schema`: with
/// `cut`, terminated (as a network failure or a Postgres restart would).
/// Returns how many there were.
async fn listeners(schema: &PgSchema, cut: bool) -> usize {
    let pool = sqlx::AnyPool::connect(&schema.url).await.unwrap();
    let current: String = sqlx::query_scalar("SELECT CAST(current_schema() AS TEXT)")
        .fetch_one(&pool)
        .await
        .unwrap();
    let channel = tollgate_identity::auth::change_channel(&current);
    let sql = match cut {
        true => "SELECT CAST(pg_terminate_backend(pid) AS TEXT) FROM pg_stat_activity WHERE application_name = $1",
        false => "SELECT CAST(pid AS TEXT) FROM pg_stat_activity WHERE application_name = $1",
    };
    let found: Vec<String> = sqlx::query_scalar(sql).bind(&channel).fetch_all(&pool).await.unwrap();
    pool.close().await;
    found.len()
}

#[tokio::test]
async fn revocation_reaches_another_gateway_on_the_same_postgres_within_a_second() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let config = format!("database_url = \"{}\"\n{}", schema.url, standard_config(mock, EXTRA));
    let first = Gateway::start(&config).await;
    let second = first.another().await;
    let owner = signup(&first, "owner@revocation.test").await;
    first.admin(&["credit", "--workspace", &owner.workspace_id, "--usd", "5"]);

    // A key that works on both gateways, and is cached by the second.
    let created = method(&first, Some(&owner.key), "keys.create", json!({"name": "ci"}))
        .await
        .unwrap();
    let key = created["api_key"].as_str().unwrap();
    for gateway in [&first, &second, &second] {
        let (status, _, body) = chat_with(gateway, key).await;
        assert_eq!(status, 200, "{body}");
    }
    method(
        &first,
        Some(&owner.key),
        "keys.revoke",
        json!({"key_id": created["key_id"]}),
    )
    .await
    .unwrap();
    let took = until_status(&second, key, 401, Duration::from_secs(5)).await;
    assert!(
        took < Duration::from_secs(1),
        "refused on the second gateway only after {took:?}"
    );
    // The second gateway read the key from the database just before the
    // revocation, so a 1 s cache TTL alone would refuse it only ~1 s later:
    // this fast, the notification did it.
    assert!(took < Duration::from_millis(500), "not the notification: {took:?}");
    assert_eq!(chat_with(&first, key).await.0, 401);

    // A role change and a removal travel the same way.
    let dev = signup(&first, "dev@revocation.test").await;
    method(
        &first,
        Some(&owner.key),
        "members.add",
        json!({"email": "dev@revocation.test", "role": "developer"}),
    )
    .await
    .unwrap();
    let dev_key = method(
        &first,
        Some(&dev.key),
        "keys.create",
        json!({"workspace_id": owner.workspace_id}),
    )
    .await
    .unwrap();
    let dev_key = dev_key["api_key"].as_str().unwrap();
    assert_eq!(chat_with(&second, dev_key).await.0, 200);
    method(
        &first,
        Some(&owner.key),
        "members.set-role",
        json!({"user_id": dev.user_id, "role": "viewer"}),
    )
    .await
    .unwrap();
    let took = until_status(&second, dev_key, 403, Duration::from_secs(5)).await;
    assert!(took < Duration::from_secs(1), "role change seen after {took:?}");
    method(
        &first,
        Some(&owner.key),
        "members.set-role",
        json!({"user_id": dev.user_id, "role": "developer"}),
    )
    .await
    .unwrap();
    until_status(&second, dev_key, 200, Duration::from_secs(1)).await;
    method(
        &first,
        Some(&owner.key),
        "members.remove",
        json!({"user_id": dev.user_id}),
    )
    .await
    .unwrap();
    let took = until_status(&second, dev_key, 401, Duration::from_secs(5)).await;
    assert!(took < Duration::from_secs(1), "removal seen after {took:?}");

    // A notification lost with the listening connection cannot keep a key
    // alive: the second gateway forgets its cached keys when the feed drops.
    let other = method(&first, Some(&owner.key), "keys.create", json!({"name": "other"}))
        .await
        .unwrap();
    let other_key = other["api_key"].as_str().unwrap();
    assert_eq!(chat_with(&second, other_key).await.0, 200);
    assert_eq!(listeners(&schema, true).await, 2, "each gateway listens");
    method(
        &first,
        Some(&owner.key),
        "keys.revoke",
        json!({"key_id": other["key_id"]}),
    )
    .await
    .unwrap();
    let took = until_status(&second, other_key, 401, Duration::from_secs(5)).await;
    assert!(
        took < Duration::from_secs(1),
        "refused after a cut feed only after {took:?}"
    );
    // …and the feed comes back: a later revocation is seen as quickly.
    let start = Instant::now();
    while listeners(&schema, false).await < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the listeners did not reconnect"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let last = method(&first, Some(&owner.key), "keys.create", json!({"name": "last"}))
        .await
        .unwrap();
    let last_key = last["api_key"].as_str().unwrap();
    assert_eq!(chat_with(&second, last_key).await.0, 200);
    method(
        &first,
        Some(&owner.key),
        "keys.revoke",
        json!({"key_id": last["key_id"]}),
    )
    .await
    .unwrap();
    let took = until_status(&second, last_key, 401, Duration::from_secs(5)).await;
    assert!(took < Duration::from_millis(500), "after reconnecting: {took:?}");
    second.assert_still_serving().await;
}

#[tokio::test]
async fn a_workspace_scoped_key_acts_only_in_its_workspace() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, EXTRA)).await;
    let owner = signup(&gateway, "owner@scope.test").await;
    gateway.admin(&["credit", "--workspace", &owner.workspace_id, "--usd", "5"]);
    let other = method(
        &gateway,
        Some(&owner.key),
        "workspaces.create",
        json!({"name": "other"}),
    )
    .await
    .unwrap();
    let other_id = other["workspace_id"].as_str().unwrap();

    // The default key (scope user) reaches both workspaces.
    method(
        &gateway,
        Some(&owner.key),
        "workspaces.get",
        json!({"workspace_id": other_id}),
    )
    .await
    .unwrap();
    let scoped = method(
        &gateway,
        Some(&owner.key),
        "keys.create",
        json!({"name": "ci", "scope": "workspace"}),
    )
    .await
    .unwrap();
    assert_eq!(scoped["scope"], "workspace");
    let key = scoped["api_key"].as_str().unwrap();

    // In its own workspace it works as before, data plane included.
    method(&gateway, Some(key), "workspaces.get", json!({})).await.unwrap();
    method(&gateway, Some(key), "namespaces.create", json!({"name": "scoped-ns"}))
        .await
        .unwrap();
    assert_eq!(chat_with(&gateway, key).await.0, 200);
    // Anywhere else it finds nothing, exactly as for a stranger.
    for op in ["workspaces.get", "keys.list", "members.list", "wallet.get"] {
        let (reason, _) = method(&gateway, Some(key), op, json!({"workspace_id": other_id}))
            .await
            .unwrap_err();
        assert_eq!(reason, "NOT_FOUND", "{op}");
    }
    let (reason, _) = method(&gateway, Some(key), "keys.create", json!({"workspace_id": other_id}))
        .await
        .unwrap_err();
    assert_eq!(reason, "NOT_FOUND");
    let listed = method(&gateway, Some(key), "workspaces.list", json!({})).await.unwrap();
    let ids: Vec<&str> = listed["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workspace_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [owner.workspace_id.as_str()]);
    let (reason, _) = method(&gateway, Some(key), "workspaces.create", json!({"name": "escape"}))
        .await
        .unwrap_err();
    assert_eq!(reason, "PERMISSION_DENIED");
    // It cannot mint a key that escapes; the keys it makes are scoped too.
    let (reason, _) = method(&gateway, Some(key), "keys.create", json!({"scope": "user"}))
        .await
        .unwrap_err();
    assert_eq!(reason, "PERMISSION_DENIED");
    let child = method(&gateway, Some(key), "keys.create", json!({})).await.unwrap();
    assert_eq!(child["scope"], "workspace");
    let (reason, _) = method(
        &gateway,
        Some(child["api_key"].as_str().unwrap()),
        "workspaces.get",
        json!({"workspace_id": other_id}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "NOT_FOUND");
    let (reason, message) = method(&gateway, Some(&owner.key), "keys.create", json!({"scope": "galaxy"}))
        .await
        .unwrap_err();
    assert_eq!(reason, "INVALID_PARAMS", "{message}");

    // keys.list shows each key's scope; the CLI creates scoped keys too.
    let output = std::process::Command::new(common::BIN)
        .args(["keys", "create", "--name", "cli", "--scope", "workspace", "--json"])
        .args(["--url", &gateway.url, "--api-key", &owner.key])
        .env("TOLLGATE_PROFILE_FILE", gateway.dir.path().join("profiles.toml"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let from_cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(from_cli["scope"], "workspace");
    let keys = method(&gateway, Some(&owner.key), "keys.list", json!({}))
        .await
        .unwrap();
    let scope_of = |id: &Value| {
        keys["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["key_id"] == *id)
            .map(|k| k["scope"].clone())
            .unwrap()
    };
    assert_eq!(scope_of(&scoped["key_id"]), "workspace");
    assert_eq!(scope_of(&from_cli["key_id"]), "workspace");
    assert_eq!(
        keys["keys"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["scope"] == "user")
            .count(),
        1
    );
}

#[tokio::test]
async fn keys_over_their_request_rate_get_429_with_retry_after() {
    let mock = start_mock(Default::default()).await;
    let extra = format!("{EXTRA}[limits]\nkey_requests_per_minute = 3\n");
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let key = gateway.api_key.clone();
    for _ in 0..3 {
        let (status, _, body) = chat_with(&gateway, &key).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, headers, body) = chat_with(&gateway, &key).await;
    assert_eq!(status, 429, "{body}");
    let error = assert_error_shape(&body);
    assert_eq!(error["type"], "rate_limit_error");
    assert_eq!(error["code"], "rate_limit_exceeded");
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(
        (1..=20).contains(&retry_after),
        "one request comes back every 20 s: {retry_after}"
    );
    // Refused before the body is read: an unparseable body still gets 429.
    let response = gateway
        .post("/v1/chat/completions")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert!(response.headers().contains_key("retry-after"));

    // Each key has its own budget; a key's own limit only tightens the default.
    let owner = gateway.api_key.as_str();
    let (reason, message) = method(&gateway, Some(owner), "keys.create", json!({"requests_per_minute": 10}))
        .await
        .unwrap_err();
    assert_eq!(reason, "INVALID_PARAMS");
    assert!(message.contains("key_requests_per_minute"), "{message}");
    let tight = method(&gateway, Some(owner), "keys.create", json!({"requests_per_minute": 1}))
        .await
        .unwrap();
    assert_eq!(tight["requests_per_minute"], 1);
    let tight = tight["api_key"].as_str().unwrap();
    assert_eq!(chat_with(&gateway, tight).await.0, 200);
    let (status, headers, _) = chat_with(&gateway, tight).await;
    assert_eq!(status, 429);
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((21..=60).contains(&retry_after), "one a minute: {retry_after}");
    let fresh = method(&gateway, Some(owner), "keys.create", json!({})).await.unwrap();
    assert_eq!(chat_with(&gateway, fresh["api_key"].as_str().unwrap()).await.0, 200);
    // The control plane is not rate limited by this, and the server keeps serving.
    method(&gateway, Some(&key), "workspaces.get", json!({})).await.unwrap();
}

/// A client whose connections come from `source` (any 127/8 address is local).
fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

async fn signup_from(
    gateway: &Gateway,
    client: &reqwest::Client,
    forwarded_for: Option<&str>,
    name: &str,
    email: &str,
) -> Result<Value, (String, String)> {
    let mut request = client
        .post(format!("{}/a2a", gateway.url))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "accounts/signup", "params": {"name": name, "email": email}}),
        );
    if let Some(forwarded_for) = forwarded_for {
        request = request.header("X-Forwarded-For", forwarded_for);
    }
    let body: Value = request.send().await.unwrap().json().await.unwrap();
    match body.get("result") {
        Some(result) => Ok(result.clone()),
        None => Err(helpers::rpc_error(&body["error"])),
    }
}

#[tokio::test]
async fn sign_up_budgets_are_per_client_and_spent_only_on_valid_input() {
    let mock = start_mock(Default::default()).await;
    let extra = "[control_plane]\nsignup_per_minute = 2\ntrusted_proxies = [\"127.0.0.2\"]\n";
    let gateway = Gateway::start(&standard_config(mock, extra)).await;
    let one = client_from("127.0.0.1");

    // Invalid input is refused without touching the budget.
    for (name, email) in [
        ("", "a@x.test"),
        ("Ann", "not-an-address"),
        (&*"n".repeat(201), "b@x.test"),
    ] {
        let (reason, _) = signup_from(&gateway, &one, None, name, email).await.unwrap_err();
        assert_eq!(reason, "INVALID_PARAMS", "{name:?} {email}");
    }
    signup_from(&gateway, &one, None, "A", "a1@x.test").await.unwrap();
    signup_from(&gateway, &one, None, "A", "a2@x.test").await.unwrap();
    let (reason, message) = signup_from(&gateway, &one, None, "A", "a3@x.test").await.unwrap_err();
    assert_eq!(reason, "RESOURCE_EXHAUSTED");
    assert!(message.contains("try again in"), "{message}");
    // An untrusted peer cannot pick another budget with X-Forwarded-For.
    let (reason, _) = signup_from(&gateway, &one, Some("198.51.100.1"), "A", "a4@x.test")
        .await
        .unwrap_err();
    assert_eq!(reason, "RESOURCE_EXHAUSTED");

    // Another client is not blocked by the first one's exhausted budget.
    let three = client_from("127.0.0.3");
    signup_from(&gateway, &three, None, "C", "c1@x.test").await.unwrap();

    // Behind the trusted proxy, each forwarded client has its own budget.
    let proxy = client_from("127.0.0.2");
    for email in ["p1@x.test", "p2@x.test"] {
        signup_from(&gateway, &proxy, Some("6.6.6.6, 203.0.113.9"), "P", email)
            .await
            .unwrap();
    }
    let (reason, _) = signup_from(&gateway, &proxy, Some("7.7.7.7, 203.0.113.9"), "P", "p3@x.test")
        .await
        .unwrap_err();
    assert_eq!(reason, "RESOURCE_EXHAUSTED", "the spoofable left part does not matter");
    signup_from(&gateway, &proxy, Some("203.0.113.10"), "Q", "q1@x.test")
        .await
        .unwrap();
}

#[tokio::test]
async fn namespaces_per_workspace_are_limited() {
    let mock = start_mock(Default::default()).await;
    let extra = format!("{EXTRA}max_namespaces_per_workspace = 2\n");
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let owner = signup(&gateway, "owner@ns.test").await;
    for name in ["one", "two"] {
        method(&gateway, Some(&owner.key), "namespaces.create", json!({"name": name}))
            .await
            .unwrap();
    }
    let (reason, message) = method(
        &gateway,
        Some(&owner.key),
        "namespaces.create",
        json!({"name": "three"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "RESOURCE_EXHAUSTED");
    assert!(message.contains("max_namespaces_per_workspace"), "{message}");
    let (reason, _) = method(&gateway, Some(&owner.key), "namespaces.create", json!({"name": "two"}))
        .await
        .unwrap_err();
    assert_eq!(reason, "ALREADY_EXISTS");
    // Another workspace has its own count; deleting one frees a place.
    let other = signup(&gateway, "other@ns.test").await;
    method(
        &gateway,
        Some(&other.key),
        "namespaces.create",
        json!({"name": "three"}),
    )
    .await
    .unwrap();
    method(&gateway, Some(&owner.key), "namespaces.delete", json!({"name": "one"}))
        .await
        .unwrap();
    // The other workspace holds "three" now: a name is one workspace's.
    let (reason, _) = method(
        &gateway,
        Some(&owner.key),
        "namespaces.create",
        json!({"name": "three"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "ALREADY_EXISTS");
    method(&gateway, Some(&owner.key), "namespaces.create", json!({"name": "four"}))
        .await
        .unwrap();
}

fn digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

async fn upload(gateway: &Gateway, key: &str, bytes: &[u8]) -> (u16, Value) {
    let response = gateway
        .http
        .put(format!("{}/v1/blobs/{}", gateway.url, digest(bytes)))
        .bearer_auth(key)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn blob_uploads_stop_at_the_workspace_quota() {
    let mock = start_mock(Default::default()).await;
    let extra = format!("{EXTRA}[registry]\nworkspace_quota_bytes = 1000\n");
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let key = gateway.api_key.clone();
    let first = vec![1u8; 600];
    assert_eq!(upload(&gateway, &key, &first).await.0, 201);
    assert_eq!(
        upload(&gateway, &key, &first).await.0,
        201,
        "the same blob again counts once"
    );
    let too_much = vec![2u8; 401];
    let (status, body) = upload(&gateway, &key, &too_much).await;
    assert_eq!(status, 413, "{body}");
    let error = assert_error_shape(&body);
    assert_eq!(error["code"], "upload_quota_exceeded");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("registry.workspace_quota_bytes"),
        "{body}"
    );
    // Refused content is not stored.
    let stored = gateway
        .http
        .get(format!("{}/v1/blobs/{}", gateway.url, digest(&too_much)))
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), 404);
    // A failed upload (wrong digest) spends nothing: exactly the quota still fits.
    let response = gateway
        .http
        .put(format!("{}/v1/blobs/{}", gateway.url, digest(b"something else")))
        .bearer_auth(&key)
        .body(vec![3u8; 400])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(upload(&gateway, &key, &[3u8; 400]).await.0, 201);
    assert_eq!(upload(&gateway, &key, &[4u8; 1]).await.0, 413);
    // Another workspace has its own quota.
    let other = signup(&gateway, "other@quota.test").await;
    assert_eq!(upload(&gateway, &other.key, &[5u8; 900]).await.0, 201);
}
