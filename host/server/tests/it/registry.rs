//! Package registry and hot-installed adapters, end to end against the real
//! binary: immutability (409), digest checks, world checks, namespace
//! permissions, public cacheable reads, yank semantics, a hot upgrade under
//! load, and the same rules on S3-compatible storage (a local moto server).

use crate::common;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Gateway, assert_error_shape, standard_config, start_mock};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tollgate_mock_upstream::MockOptions;

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn manifest(name: &str, version: &str, kind: &str, world: &str, bytes: &[u8]) -> Value {
    json!({
        "schema_version": 1, "kind": kind, "name": name, "version": version,
        "description": "test package", "license": "Apache-2.0",
        "content": {"digest": digest(bytes), "size": bytes.len(), "media_type": "application/wasm"},
        "metadata": {"world": world}
    })
}

const ADAPTER_WORLD: &str = "tollgate:provider/provider-adapter@0.1.0";

/// (status, body) of an HTTP exchange; `key` None sends no Authorization.
async fn call(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    key: Option<&str>,
    body: Option<Vec<u8>>,
) -> (u16, Value) {
    let mut request = gw.http.request(method, format!("{}{path}", gw.url));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.body(body).header("content-type", "application/json");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Uploads the blob, then PUTs the manifest: (status of the publish, body).
async fn publish(gw: &Gateway, key: &str, manifest: &Value, bytes: &[u8]) -> (u16, Value) {
    let blob = format!("/v1/blobs/{}", digest(bytes));
    let (status, body) = call(gw, reqwest::Method::PUT, &blob, Some(key), Some(bytes.to_vec())).await;
    assert_eq!(status, 201, "{body}");
    let path = format!(
        "/v1/packages/{}/{}",
        manifest["name"].as_str().unwrap(),
        manifest["version"].as_str().unwrap()
    );
    call(
        gw,
        reqwest::Method::PUT,
        &path,
        Some(key),
        Some(serde_json::to_vec(manifest).unwrap()),
    )
    .await
}

async fn install(gw: &Gateway, provider: &str, package: &str, version: &str) -> (u16, Value) {
    let body = serde_json::to_vec(&json!({"package": package, "version": version})).unwrap();
    call(
        gw,
        reqwest::Method::PUT,
        &format!("/v1/installs/{provider}"),
        Some(&gw.api_key),
        Some(body),
    )
    .await
}

async fn create_namespace(gw: &Gateway, key: &str, name: &str) {
    let answer = try_create_namespace(gw, key, name).await;
    assert!(answer.get("result").is_some(), "{answer}");
}

/// The JSON-RPC answer to `namespaces/create`.
async fn try_create_namespace(gw: &Gateway, key: &str, name: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "namespaces/create", "params": {"name": name}});
    gw.http
        .post(format!("{}/a2a", gw.url))
        .header("A2A-Version", "1.0")
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Makes the test account's workspace an operator (may install) via a reload.
pub(crate) async fn make_operator(gw: &Gateway) {
    let mut config = std::fs::read_to_string(&gw.config_path).unwrap();
    config.push_str(&format!(
        "\n[registry]\noperator_workspaces = [\"{}\"]\n",
        gw.workspace_id
    ));
    std::fs::write(&gw.config_path, config).unwrap();
    gw.hangup();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = call(gw, reqwest::Method::GET, "/v1/installs", Some(&gw.api_key), None).await;
        if status == 200 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the reload never made the workspace an operator"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The built-in openai-compatible component, read back through the public API.
async fn builtin_adapter(gw: &Gateway) -> Vec<u8> {
    let (status, index) = call(
        gw,
        reqwest::Method::GET,
        "/v1/packages/tollgate/openai-compatible",
        None,
        None,
    )
    .await;
    assert_eq!(status, 200, "{index}");
    let digest = index["versions"][0]["digest"].as_str().unwrap().to_string();
    let response = gw
        .http
        .get(format!("{}/v1/blobs/{digest}", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    response.bytes().await.unwrap().to_vec()
}

/// A component that implements the tool-server world, not the adapter one.
fn tool_server_component() -> Vec<u8> {
    wat::parse_str(
        r#"(component
            (core module $m (func (export "f")))
            (core instance $i (instantiate $m))
            (func $f (canon lift (core func $i "f")))
            (instance $tools (export "list-tools" (func $f)))
            (export "tollgate:tool/tools@0.1.0" (instance $tools)))"#,
    )
    .unwrap()
}

async fn adapter_of(gw: &Gateway, model: &str) -> (u16, String) {
    let (status, _, body) = gw
        .chat(json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    (
        status,
        body["service"]["attempts"][0]["adapter"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

/// Every registry rule, on whatever storage `extra` configures.
async fn registry_rules(database: &str, extra: &str) {
    let mock = start_mock(MockOptions::default()).await;
    let gw = Gateway::start(&format!("{database}{}", standard_config(mock, extra))).await;
    let key = gw.api_key.clone();
    let bytes = builtin_adapter(&gw).await;

    // Public reads need no key; searching by kind and text.
    let (status, found) = call(
        &gw,
        reqwest::Method::GET,
        "/v1/packages?kind=provider-adapter&q=OPENAI",
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        found["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "tollgate/openai-compatible"),
        "{found}"
    );
    let (status, found) = call(&gw, reqwest::Method::GET, "/v1/packages?kind=skill", None, None).await;
    let skills: Vec<&str> = found["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        (status, skills),
        (200, vec!["tollgate/summarize"]),
        "only the built-in skill"
    );
    let (status, body) = call(&gw, reqwest::Method::GET, "/v1/packages?kind=widget", None, None).await;
    assert_eq!(status, 400);
    assert_error_shape(&body);

    // Publishing needs a key, the namespace in the key's workspace, and no other owner.
    let v1 = manifest("acme/compat", "1.0.0", "provider-adapter", ADAPTER_WORLD, &bytes);
    let path = "/v1/packages/acme/compat/1.0.0";
    let (status, body) = call(
        &gw,
        reqwest::Method::PUT,
        path,
        None,
        Some(serde_json::to_vec(&v1).unwrap()),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = publish(&gw, &key, &v1, &bytes).await;
    assert_eq!(status, 403, "no namespace yet: {body}");
    assert_eq!(body["error"]["code"], "permission_denied");
    create_namespace(&gw, &key, "acme").await;
    let (status, body) = publish(&gw, &key, &v1, &bytes).await;
    assert_eq!(status, 201, "{body}");

    let other: Value = serde_json::from_str(&gw.admin(&["create-account", "--name", "other", "--json"])).unwrap();
    let other_key = other["api_key"].as_str().unwrap();
    // The name is taken gateway-wide, so the other workspace cannot even create it.
    let taken = try_create_namespace(&gw, other_key, "acme").await;
    assert_eq!(taken["error"]["data"][0]["reason"], "ALREADY_EXISTS", "{taken}");
    let v9 = manifest("acme/compat", "9.0.0", "provider-adapter", ADAPTER_WORLD, &bytes);
    let (status, body) = publish(&gw, other_key, &v9, &bytes).await;
    assert_eq!(status, 403, "another workspace owns 'acme' in the registry: {body}");
    let builtin = manifest("tollgate/fake", "1.0.0", "provider-adapter", ADAPTER_WORLD, &bytes);
    assert_eq!(
        publish(&gw, &key, &builtin, &bytes).await.0,
        403,
        "the built-in namespace is reserved"
    );

    // Immutable: the same version again is a conflict, also after a yank.
    let (status, body) = publish(&gw, &key, &v1, &bytes).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "version_exists");
    let (status, _) = call(
        &gw,
        reqwest::Method::POST,
        "/v1/packages/acme/compat/1.0.0/yank",
        Some(other_key),
        None,
    )
    .await;
    assert_eq!(status, 403, "only the owner yanks");
    let (status, _) = call(
        &gw,
        reqwest::Method::POST,
        "/v1/packages/acme/compat/1.0.0/yank",
        Some(&key),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(publish(&gw, &key, &v1, &bytes).await.0, 409);
    let (status, _) = call(
        &gw,
        reqwest::Method::POST,
        "/v1/packages/acme/compat/1.0.0/unyank",
        Some(&key),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let deprecation = serde_json::to_vec(&json!({"message": "use 2.x"})).unwrap();
    let (status, _) = call(
        &gw,
        reqwest::Method::POST,
        "/v1/packages/acme/compat/1.0.0/deprecate",
        Some(&key),
        Some(deprecation),
    )
    .await;
    assert_eq!(status, 200);

    // Cacheable public reads of the index, the manifest and the blob.
    let response = gw.http.get(format!("{}{path}", gw.url)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    let served: Value = response.json().await.unwrap();
    assert_eq!(served["content"]["digest"], v1["content"]["digest"]);
    let (status, index) = call(&gw, reqwest::Method::GET, "/v1/packages/acme/compat", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(index["versions"][0]["deprecated"], "use 2.x");
    assert_eq!(index["versions"][0]["yanked"], false);

    // A blob that does not match its address is refused.
    let wrong = format!("/v1/blobs/{}", digest(b"something else"));
    let (status, body) = call(&gw, reqwest::Method::PUT, &wrong, Some(&key), Some(bytes.clone())).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "digest_mismatch");
    let mut lying = manifest("acme/compat", "1.1.0", "provider-adapter", ADAPTER_WORLD, &bytes);
    lying["content"]["size"] = json!(bytes.len() + 1);
    assert_eq!(publish(&gw, &key, &lying, &bytes).await.0, 400);

    // The wrong world is refused with a message naming both worlds.
    let tool = tool_server_component();
    let disguised = manifest("acme/weather", "1.0.0", "provider-adapter", ADAPTER_WORLD, &tool);
    let (status, body) = publish(&gw, &key, &disguised, &tool).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "wrong_world");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("must export 'tollgate:provider/adapter@0.1.0'"),
        "{message}"
    );
    assert!(message.contains("'tollgate:tool/tools@0.1.0'"), "{message}");
    let honest = manifest(
        "acme/weather",
        "1.0.0",
        "tool-server",
        "tollgate:tool/tool-server@0.1.0",
        &tool,
    );
    assert_eq!(publish(&gw, &key, &honest, &tool).await.0, 201);

    // Installs: operators only; a tool server cannot serve a provider.
    assert_eq!(install(&gw, "mock", "acme/compat", "1.0.0").await.0, 403);
    make_operator(&gw).await;
    let (status, body) = install(&gw, "mock", "acme/weather", "1.0.0").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("wrong_package_kind")),
        "{body}"
    );
    let (status, body) = install(&gw, "nope", "acme/compat", "1.0.0").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = install(&gw, "mock", "acme/compat", "1.0.0").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        adapter_of(&gw, "mock/small").await,
        (200, "acme/compat@1.0.0".to_string())
    );

    // A provider configured with a package reference loads it on reload.
    let mut config = std::fs::read_to_string(&gw.config_path).unwrap();
    config.push_str(&format!(
        "\n[providers.pinned]\nadapter = \"acme/compat@1.0.0\"\nbase_url = \"http://{mock}/v1\"\napi_key = \"k\"\n\
         models = [{{ id = \"small\", input_price_per_mtok = \"1\", output_price_per_mtok = \"1\" }}]\n"
    ));
    std::fs::write(&gw.config_path, config).unwrap();
    gw.hangup();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, adapter) = adapter_of(&gw, "pinned/small").await;
        if status == 200 {
            assert_eq!(adapter, "acme/compat@1.0.0");
            break;
        }
        assert!(Instant::now() < deadline, "the pinned provider never appeared");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn registry_rules_on_the_filesystem() {
    registry_rules("", "").await;
}

/// The index on Postgres (the blobs stay local).
#[tokio::test(flavor = "multi_thread")]
async fn registry_rules_with_the_index_on_postgres() {
    let Some(schema) = common::PgSchema::create().await else {
        return;
    };
    registry_rules(&format!("database_url = \"{}\"\n", schema.url), "").await;
}

/// Yanked: no new installs, but running installs keep serving, even in a
/// freshly started gateway. Content altered at rest is refused on install.
#[tokio::test(flavor = "multi_thread")]
async fn yanked_versions_keep_serving_existing_installs() {
    let mock = start_mock(MockOptions::default()).await;
    let gw = Gateway::start(&standard_config(mock, "")).await;
    let key = gw.api_key.clone();
    let bytes = builtin_adapter(&gw).await;
    create_namespace(&gw, &key, "acme").await;
    make_operator(&gw).await;
    for version in ["1.0.0", "2.0.0"] {
        let m = manifest("acme/compat", version, "provider-adapter", ADAPTER_WORLD, &bytes);
        assert_eq!(publish(&gw, &key, &m, &bytes).await.0, 201);
    }
    assert_eq!(install(&gw, "mock", "acme/compat", "1.0.0").await.0, 200);
    let (status, _) = call(
        &gw,
        reqwest::Method::POST,
        "/v1/packages/acme/compat/1.0.0/yank",
        Some(&key),
        None,
    )
    .await;
    assert_eq!(status, 200);

    assert_eq!(
        adapter_of(&gw, "mock/small").await,
        (200, "acme/compat@1.0.0".to_string())
    );
    let (status, body) = install(&gw, "bad", "acme/compat", "1.0.0").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "version_yanked");
    let restarted = gw.another().await;
    assert_eq!(
        adapter_of(&restarted, "mock/small").await,
        (200, "acme/compat@1.0.0".to_string())
    );

    // An install on one gateway reaches another sharing the database.
    assert_eq!(install(&gw, "mock", "acme/compat", "2.0.0").await.0, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while adapter_of(&restarted, "mock/small").await.1 != "acme/compat@2.0.0" {
        assert!(
            Instant::now() < deadline,
            "the other gateway never picked up the install"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Alter the stored content: a new install refuses it, the loaded one serves on.
    let hex = digest(&bytes)["sha256:".len()..].to_string();
    let blob = gw.dir.path().join("data/registry/blobs/sha256").join(hex);
    std::fs::write(&blob, b"tampered").unwrap();
    let (status, body) = install(&gw, "bad", "acme/compat", "2.0.0").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "digest_mismatch");
    assert_eq!(
        adapter_of(&gw, "mock/small").await,
        (200, "acme/compat@2.0.0".to_string())
    );

    // Each change made through the registry's HTTP API is in the audit log.
    let audit = a2a(&gw, Some(&key), "audit/list", json!({"limit": 500})).await;
    let ops: Vec<&str> = audit["result"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["op"].as_str().unwrap())
        .collect();
    let count = |op: &str| ops.iter().filter(|o| **o == op).count();
    assert_eq!(
        (
            count("packages.upload"),
            count("packages.publish"),
            count("packages.yank")
        ),
        (2, 2, 1),
        "{ops:?}"
    );
    assert_eq!(
        count("adapters.install"),
        2,
        "the refused installs are not changes: {ops:?}"
    );
}

/// 50 requests a second for 10 seconds; v2 is installed halfway. No request
/// fails, and every request sent after the install answered is served by v2.
#[tokio::test(flavor = "multi_thread")]
async fn hot_upgrade_under_load_fails_no_request() {
    let mock = start_mock(MockOptions {
        latency_ms: 50,
        require_api_key: None,
        ..Default::default()
    })
    .await;
    let gw = Arc::new(Gateway::start(&standard_config(mock, "")).await);
    let key = gw.api_key.clone();
    let bytes = builtin_adapter(&gw).await;
    create_namespace(&gw, &key, "acme").await;
    make_operator(&gw).await;
    for version in ["1.0.0", "2.0.0"] {
        let m = manifest("acme/compat", version, "provider-adapter", ADAPTER_WORLD, &bytes);
        assert_eq!(publish(&gw, &key, &m, &bytes).await.0, 201);
    }
    assert_eq!(install(&gw, "mock", "acme/compat", "1.0.0").await.0, 200);

    // A slow request that starts on v1 and is still running when v2 goes in.
    let slow = {
        let gw = gw.clone();
        tokio::spawn(async move {
            let (status, _, body) = gw
                .chat(
                    json!({"model": "mock/small", "messages": [{"role": "user", "content": "slow"}],
                             "mock": {"latency_ms": 7000}}),
                )
                .await;
            (
                status,
                body["service"]["attempts"][0]["adapter"].clone(),
                Instant::now(),
            )
        })
    };

    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut requests = Vec::new();
    let mut installed_at = None;
    for i in 0..500 {
        tick.tick().await;
        if i == 250 {
            let gw = gw.clone();
            installed_at = Some(tokio::spawn(async move {
                let (status, body) = install(&gw, "mock", "acme/compat", "2.0.0").await;
                assert_eq!(status, 200, "{body}");
                Instant::now()
            }));
        }
        let gw = gw.clone();
        requests.push(tokio::spawn(async move {
            let sent = Instant::now();
            let (status, adapter) = adapter_of(&gw, "mock/small").await;
            (sent, status, adapter)
        }));
    }
    let installed_at = installed_at.unwrap().await.unwrap();
    let mut by_version = std::collections::BTreeMap::<String, usize>::new();
    for request in requests {
        let (sent, status, adapter) = request.await.unwrap();
        assert_eq!(status, 200, "a request failed during the upgrade");
        if sent > installed_at {
            assert_eq!(
                adapter, "acme/compat@2.0.0",
                "a request sent after the install used the old version"
            );
        }
        *by_version.entry(adapter).or_default() += 1;
    }
    let (status, adapter, finished) = slow.await.unwrap();
    assert_eq!(status, 200);
    assert!(
        finished > installed_at,
        "the slow request was meant to outlive the install"
    );
    assert_eq!(
        adapter, "acme/compat@1.0.0",
        "an in-flight request finishes on the version it started with"
    );
    eprintln!("500 requests in {:?}: {by_version:?}", start.elapsed());
    assert!(
        by_version.get("acme/compat@1.0.0").copied().unwrap_or(0) >= 200,
        "{by_version:?}"
    );
    assert!(
        by_version.get("acme/compat@2.0.0").copied().unwrap_or(0) >= 200,
        "{by_version:?}"
    );
}

pub(crate) struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A local S3-compatible server (moto) with a bucket, or None outside CI
/// when moto is not installed.
pub(crate) async fn start_moto() -> Option<(Moto, String)> {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/venv/bin/moto_server");
    if !bin.is_file() {
        let hint = "moto_server is missing: pip install -r tests/python/requirements.txt into target/venv";
        assert!(std::env::var_os("CI").is_none(), "{hint}");
        eprintln!("SKIPPED: {hint}");
        return None;
    }
    let port = common::free_port();
    let child = Command::new(bin)
        .args(["-p", &port.to_string(), "-H", "127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moto = Moto(child);
    let endpoint = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    // moto does not check signatures, so a plain PUT creates the bucket.
    while http.put(format!("{endpoint}/tollgate-test")).send().await.is_err() {
        assert!(Instant::now() < deadline, "moto_server did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Some((moto, endpoint))
}

#[tokio::test(flavor = "multi_thread")]
async fn registry_rules_on_s3_compatible_storage() {
    let Some((_moto, endpoint)) = start_moto().await else {
        return;
    };
    let extra = format!(
        "[registry.storage]\nbackend = \"s3\"\nbucket = \"tollgate-test\"\nendpoint = \"{endpoint}\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\n"
    );
    registry_rules("", &extra).await;
    // The blobs really are in the bucket.
    let listing = reqwest::get(format!("{endpoint}/tollgate-test?list-type=2"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listing.contains("blobs/sha256/"), "{listing}");
}

/// JSON-RPC call of a control-plane op on `/a2a`; the answer's `result` or `error`.
async fn a2a(gw: &Gateway, key: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = gw
        .http
        .post(format!("{}/a2a", gw.url))
        .header("A2A-Version", "1.0")
        .json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.unwrap().json().await.unwrap()
}

/// The same registry through the control plane: `packages.*` and `adapters.*`.
#[tokio::test(flavor = "multi_thread")]
async fn control_plane_ops_manage_packages_and_installs() {
    let mock = start_mock(MockOptions::default()).await;
    let gw = Gateway::start(&standard_config(mock, "")).await;
    let key = gw.api_key.clone();
    let bytes = builtin_adapter(&gw).await;
    create_namespace(&gw, &key, "acme").await;
    let m = manifest("acme/compat", "1.0.0", "provider-adapter", ADAPTER_WORLD, &bytes);
    assert_eq!(publish(&gw, &key, &m, &bytes).await.0, 201);

    let found = a2a(
        &gw,
        None,
        "packages/search",
        json!({"kind": "provider-adapter", "q": "compat"}),
    )
    .await;
    assert_eq!(found["result"]["packages"][0]["name"], "acme/compat", "{found}");
    let info = a2a(&gw, None, "packages/get", json!({"name": "acme/compat"})).await;
    assert_eq!(info["result"]["versions"][0]["version"], "1.0.0", "{info}");

    let other: Value = serde_json::from_str(&gw.admin(&["create-account", "--name", "other", "--json"])).unwrap();
    let other_key = other["api_key"].as_str().unwrap();
    let refused = a2a(
        &gw,
        Some(other_key),
        "packages/yank",
        json!({"name": "acme/compat", "version": "1.0.0"}),
    )
    .await;
    assert_eq!(refused["error"]["data"][0]["reason"], "PERMISSION_DENIED", "{refused}");
    let deprecated = a2a(
        &gw,
        Some(&key),
        "packages/deprecate",
        json!({"name": "acme/compat", "version": "1.0.0", "message": "use 2"}),
    )
    .await;
    assert_eq!(deprecated["result"]["deprecated"], "use 2", "{deprecated}");

    let params = json!({"provider": "mock", "package": "acme/compat", "version": "1.0.0"});
    let refused = a2a(&gw, Some(&key), "adapters/install", params.clone()).await;
    assert_eq!(
        refused["error"]["data"][0]["reason"], "PERMISSION_DENIED",
        "not an operator yet: {refused}"
    );
    make_operator(&gw).await;
    let installed = a2a(&gw, Some(&key), "adapters/install", params).await;
    assert_eq!(installed["result"]["adapter"], "acme/compat@1.0.0", "{installed}");
    let listed = a2a(&gw, Some(&key), "adapters/list", json!({})).await;
    assert_eq!(listed["result"]["installs"][0]["provider"], "mock", "{listed}");
    assert_eq!(
        adapter_of(&gw, "mock/small").await,
        (200, "acme/compat@1.0.0".to_string())
    );

    let yanked = a2a(
        &gw,
        Some(&key),
        "packages/yank",
        json!({"name": "acme/compat", "version": "1.0.0"}),
    )
    .await;
    assert_eq!(yanked["result"]["yanked"], true, "{yanked}");
    let again = a2a(
        &gw,
        Some(&key),
        "adapters/install",
        json!({"provider": "bad", "package": "acme/compat", "version": "1.0.0"}),
    )
    .await;
    assert_eq!(again["error"]["data"][0]["reason"], "FAILED_PRECONDITION", "{again}");
}
