//! Signed packages end to end (docs/registry.md, "Signed packages"): a key
//! made and registered with the CLI, a package published signed with it and
//! installed showing its signer and what it asks for; a workspace's policy
//! that refuses unsigned and revoked-key packages and accepts the built-ins;
//! and a flipped byte in a stored blob (the gateway's own store or the
//! database copy another host reads) or manifest, refused at install.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::{Gateway, PgSchema, standard_config, start_mock};
use crate::control_plane::helpers::method;
use crate::registry::make_operator;
use tollgate_registry::signing;

/// The tool-caller skill's bytes: a small component that needs no settings.
fn skill() -> Vec<u8> {
    std::fs::read(tollgate_plugin_host::TOOL_CALLER_TEST_COMPONENT).unwrap()
}

/// A manifest of the tool-caller skill as `name@version`, content filled in.
fn skill_manifest(name: &str, version: &str) -> Value {
    let content = skill();
    json!({
        "schema_version": 1, "kind": "skill", "name": name, "version": version,
        "description": "signed test", "license": "Apache-2.0",
        "content": {"digest": tollgate_registry::Digest::of(&content).to_string(), "size": content.len(), "media_type": "application/wasm"},
        "metadata": {"world": "tollgate:skill/skill@0.1.0", "capabilities": ["tools"]}
    })
}

/// Runs `tollgate ARGS` against the gateway with its key; (success, stdout, stderr).
fn cli(gw: &Gateway, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(crate::common::BIN)
        .args(args)
        .env("TOLLGATE_URL", &gw.url)
        .env("TOLLGATE_API_KEY", &gw.api_key)
        .env_remove("TOLLGATE_SIGNING_KEY")
        .env("TOLLGATE_PROFILE_FILE", "/nonexistent/tollgate-profiles.toml")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn cli_json(gw: &Gateway, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (ok, out, err) = cli(gw, &args);
    assert!(ok, "{args:?}: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

async fn op(gw: &Gateway, name: &str, params: Value) -> Value {
    method(gw, Some(&gw.api_key), name, params)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// `(reason, message)` of an op that must fail.
async fn refused(gw: &Gateway, name: &str, params: Value) -> (String, String) {
    match method(gw, Some(&gw.api_key), name, params).await {
        Ok(answer) => panic!("{name} succeeded: {answer}"),
        Err(error) => error,
    }
}

/// A registered key and a package signed with it, over the control plane:
/// `namespace/caller@1.0.0`. Returns the key id.
async fn publish_signed(gw: &Gateway, namespace: &str) -> String {
    op(gw, "namespaces.create", json!({"name": namespace})).await;
    let key = signing::generate_key();
    let public = signing::PublicKey::of(&key);
    op(
        gw,
        "namespaces.keys.add",
        json!({"namespace": namespace, "public_key": public.to_text()}),
    )
    .await;
    let manifest = skill_manifest(&format!("{namespace}/caller"), "1.0.0");
    let parsed = tollgate_registry::Manifest::from_json(&serde_json::to_vec(&manifest).unwrap()).unwrap();
    let signature = signing::sign(&parsed, &key).unwrap();
    let published = op(
        gw,
        "packages.publish",
        json!({
            "manifest": manifest,
            "content_base64": base64::engine::general_purpose::STANDARD.encode(skill()),
            "signature": signature,
        }),
    )
    .await;
    assert_eq!(published["signed_by"], public.key_id(), "{published}");
    public.key_id()
}

/// keygen → keys add → publish --signing-key → install, all with the CLI;
/// then the policy: unsigned and revoked-key versions refused, built-ins
/// accepted, for workspace installs and adapter installs alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_signed_with_the_cli_installs_and_the_policy_refuses_the_rest() {
    let mock = start_mock(Default::default()).await;
    let gw = Gateway::start(&standard_config(mock, "")).await;
    let dir = tempfile::tempdir().unwrap();
    op(&gw, "namespaces.create", json!({"name": "signed"})).await;

    // A key: the private half owner-only, never overwritten.
    let key_file = dir.path().join("signed.key");
    let key_path = key_file.to_str().unwrap();
    let generated = cli_json(&gw, &["package", "keygen", "--out", key_path]);
    let key_id = generated["key_id"].as_str().unwrap().to_string();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the private key is readable by its owner only");
    }
    let (ok, _, err) = cli(&gw, &["package", "keygen", "--out", key_path]);
    assert!(!ok && err.contains("cannot create"), "{err}");
    let public_key = generated["public_key"].as_str().unwrap();
    let added = cli_json(
        &gw,
        &["namespaces", "keys", "add", "signed", public_key, "--name", "ci"],
    );
    assert_eq!((&added["key_id"], &added["name"]), (&json!(key_id), &json!("ci")));

    // Publish 1.0.0 signed and 1.1.0 unsigned, through the CLI.
    let manifest_file = dir.path().join("tollgate-package.json");
    let mut manifest = skill_manifest("signed/caller", "1.0.0");
    manifest.as_object_mut().unwrap().remove("content");
    std::fs::write(&manifest_file, manifest.to_string()).unwrap();
    let content = tollgate_plugin_host::TOOL_CALLER_TEST_COMPONENT;
    let manifest_path = manifest_file.to_str().unwrap();
    let published = cli_json(
        &gw,
        &[
            "package",
            "publish",
            content,
            "--manifest",
            manifest_path,
            "--signing-key",
            key_path,
        ],
    );
    assert_eq!(published["signed_by"], json!(key_id), "{published}");
    manifest["version"] = json!("1.1.0");
    std::fs::write(&manifest_file, manifest.to_string()).unwrap();
    let (ok, out, err) = cli(&gw, &["package", "publish", content, "--manifest", manifest_path]);
    assert!(ok && out.contains("unsigned"), "{out}{err}");

    // Anyone sees who signed what, and what it asks for.
    let info = method(&gw, None, "packages.get", json!({"name": "signed/caller"}))
        .await
        .unwrap();
    let versions = info["versions"].as_array().unwrap();
    assert_eq!(versions[0]["version"], "1.1.0");
    assert_eq!(versions[0]["signature"], Value::Null, "{info}");
    assert_eq!(
        versions[1]["signature"],
        json!({"key_id": key_id, "namespace": "signed", "verified": true})
    );
    assert_eq!(
        versions[1]["capabilities"],
        json!({"egress": [], "models": false, "tools": true, "credentials": false})
    );
    let (_, out, _) = cli(&gw, &["package", "show", "signed/caller"]);
    assert!(
        out.contains(&format!("[signed by key {key_id}]")) && out.contains("[unsigned]"),
        "{out}"
    );

    // Require signatures for the namespace: unsigned is refused, with the reason.
    let policy = cli_json(
        &gw,
        &["workspaces", "package-policy", "set", "--require-signed", "signed"],
    );
    assert_eq!(policy["require_signed"], json!(["signed"]));
    let (reason, message) = refused(
        &gw,
        "installs.create",
        json!({"package": "signed/caller", "version": "=1.1.0"}),
    )
    .await;
    assert_eq!(reason, "PERMISSION_DENIED");
    assert!(message.starts_with("signature_required (unsigned):"), "{message}");

    // The signed version installs, and the CLI shows its signer and asks.
    let (ok, out, err) = cli(&gw, &["install", "signed/caller@=1.0.0"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(&format!("signed by key {key_id} of namespace 'signed' (verified)")),
        "{out}"
    );
    assert!(out.contains("asks for: the workspace's tools"), "{out}");
    let shown = op(&gw, "installs.get", json!({"name": "caller"})).await;
    assert_eq!(shown["signature"]["verified"], true, "{shown}");

    // The built-ins are signed at build time and pass a policy for every namespace.
    op(&gw, "workspaces.package-policy.set", json!({"require_signed": ["*"]})).await;
    let calculator = op(&gw, "installs.create", json!({"package": "tollgate/calculator"})).await;
    assert_eq!(calculator["signature"]["namespace"], "tollgate", "{calculator}");
    assert_eq!(calculator["signature"]["verified"], true, "{calculator}");

    // Revoked: its signatures no longer count for new installs.
    let revoked = cli_json(&gw, &["namespaces", "keys", "revoke", "signed", &key_id]);
    assert!(revoked["revoked_at_ms"].is_i64(), "{revoked}");
    let (reason, message) = refused(
        &gw,
        "installs.create",
        json!({"package": "signed/caller", "version": "=1.0.0", "name": "again"}),
    )
    .await;
    assert_eq!(reason, "PERMISSION_DENIED");
    assert!(message.starts_with("signature_required (revoked_key):"), "{message}");
    let info = method(&gw, None, "packages.get", json!({"name": "signed/caller"}))
        .await
        .unwrap();
    assert_eq!(info["versions"][1]["signature"]["problem"], "revoked_key", "{info}");

    // Adapter installs follow the operator's workspace policy too.
    make_operator(&gw).await;
    let builtin = op(&gw, "packages.get", json!({"name": "tollgate/openai-compatible"})).await;
    let version = builtin["versions"][0]["version"].as_str().unwrap().to_string();
    let installed = op(
        &gw,
        "adapters.install",
        json!({"provider": "mock", "package": "tollgate/openai-compatible", "version": version}),
    )
    .await;
    assert_eq!(installed["signature"]["verified"], true, "{installed}");
    assert_eq!(installed["capabilities"]["egress"], json!([]), "{installed}");
    let adapter = builtin_adapter_bytes(&gw, &builtin).await;
    let unsigned = json!({
        "schema_version": 1, "kind": "provider-adapter", "name": "signed/compat", "version": "1.0.0",
        "license": "Apache-2.0",
        "content": {"digest": tollgate_registry::Digest::of(&adapter).to_string(), "size": adapter.len(), "media_type": "application/wasm"},
        "metadata": {"world": "tollgate:provider/provider-adapter@0.1.0"}
    });
    op(
        &gw,
        "packages.publish",
        json!({"manifest": unsigned, "content_base64": base64::engine::general_purpose::STANDARD.encode(&adapter)}),
    )
    .await;
    let response = gw
        .http
        .put(format!("{}/v1/installs/mock", gw.url))
        .bearer_auth(&gw.api_key)
        .json(&json!({"package": "signed/compat", "version": "1.0.0"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "signature_required", "{body}");
}

/// The built-in adapter's bytes, read through the public API.
async fn builtin_adapter_bytes(gw: &Gateway, info: &Value) -> Vec<u8> {
    let digest = info["versions"][0]["digest"].as_str().unwrap();
    let response = gw.get(&format!("/v1/blobs/{digest}")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap().to_vec()
}

/// A publish whose signature is not over the package, or by a key the
/// namespace does not have, is refused before anything is stored.
#[tokio::test]
async fn a_publish_signed_by_a_stranger_or_over_other_bytes_is_refused() {
    let mock = start_mock(Default::default()).await;
    let gw = Gateway::start(&standard_config(mock, "")).await;
    op(&gw, "namespaces.create", json!({"name": "strange"})).await;
    let manifest = skill_manifest("strange/caller", "1.0.0");
    let parsed = tollgate_registry::Manifest::from_json(&serde_json::to_vec(&manifest).unwrap()).unwrap();
    let stranger = signing::generate_key();
    let publish = |signature: Value| {
        json!({
            "manifest": manifest.clone(),
            "content_base64": base64::engine::general_purpose::STANDARD.encode(skill()),
            "signature": signature,
        })
    };
    let signature = signing::sign(&parsed, &stranger).unwrap();
    let (reason, message) = refused(&gw, "packages.publish", publish(json!(signature))).await;
    assert_eq!(reason, "INVALID_PARAMS");
    assert!(
        message.contains("signature_invalid") && message.contains("not registered"),
        "{message}"
    );

    let key = signing::generate_key();
    let public = signing::PublicKey::of(&key);
    op(
        &gw,
        "namespaces.keys.add",
        json!({"namespace": "strange", "public_key": public.to_text()}),
    )
    .await;
    let mut other = parsed.clone();
    other.description = "something else".into();
    let signature = signing::sign(&other, &key).unwrap();
    let (reason, message) = refused(&gw, "packages.publish", publish(json!(signature))).await;
    assert_eq!(reason, "INVALID_PARAMS");
    assert!(message.contains("not over this package"), "{message}");
    let listed = op(&gw, "namespaces.keys.list", json!({"namespace": "strange"})).await;
    assert_eq!(listed["keys"][0]["key_id"], public.key_id(), "{listed}");
    // Another workspace cannot see or change the namespace's keys.
    let other: Value = serde_json::from_str(&gw.admin(&["create-account", "--name", "other", "--json"])).unwrap();
    let (reason, _) = method(
        &gw,
        other["api_key"].as_str(),
        "namespaces.keys.list",
        json!({"namespace": "strange"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "NOT_FOUND");
}

/// A flipped byte in the stored blob, then in the stored manifest: each
/// refused at install with the documented error; put back, it installs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_a_signed_packages_blob_or_manifest_is_refused_at_install() {
    let mock = start_mock(Default::default()).await;
    let gw = Gateway::start(&standard_config(mock, "")).await;
    publish_signed(&gw, "flipped").await;
    let install = json!({"package": "flipped/caller"});

    let digest = tollgate_registry::Digest::of(&skill());
    let blob = gw.dir.path().join("data/registry/blobs/sha256").join(digest.hex());
    let original = std::fs::read(&blob).unwrap();
    let mut flipped = original.clone();
    flipped[original.len() / 2] ^= 0x01;
    std::fs::write(&blob, &flipped).unwrap();
    let (reason, message) = refused(&gw, "installs.create", install.clone()).await;
    assert_eq!(reason, "INVALID_PARAMS");
    assert!(message.contains("does not match its digest"), "{message}");
    std::fs::write(&blob, &original).unwrap();

    sqlx::any::install_default_drivers();
    let url = tollgate_core::db::sqlite_url(&gw.dir.path().join("data").join("tollgate.db"));
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let set_description = |from: &'static str, to: &'static str| {
        let pool = pool.clone();
        async move {
            let done = sqlx::query("UPDATE registry_versions SET manifest = REPLACE(manifest, $1, $2) WHERE name = $3")
                .bind(from)
                .bind(to)
                .bind("flipped/caller")
                .execute(&pool)
                .await
                .unwrap();
            assert_eq!(done.rows_affected(), 1);
        }
    };
    // "signed test" → "signed tesu": one flipped bit in one byte.
    set_description("signed test", "signed tesu").await;
    let (reason, message) = refused(&gw, "installs.create", install.clone()).await;
    assert_eq!(reason, "INVALID_PARAMS");
    assert!(message.contains("altered in storage"), "{message}");
    set_description("signed tesu", "signed test").await;

    let installed = op(&gw, "installs.create", install).await;
    assert_eq!(installed["signature"]["verified"], true, "{installed}");
}

/// Two hosts on one Postgres: the second reads the blob from the database
/// copy. A flipped byte there is refused at its install; put back, the
/// package installs there, its signature verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_the_database_copy_of_a_signed_package_is_refused_on_another_host() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let config = format!("database_url = \"{}\"\n{}", schema.url, standard_config(mock, ""));
    let first = Gateway::start(&config).await;
    let second = first.another_host("second-host").await;
    publish_signed(&first, "copied").await;

    let pool = sqlx::AnyPool::connect(&schema.url).await.unwrap();
    let digest = tollgate_registry::Digest::of(&skill()).to_string();
    let mut flipped = skill();
    flipped[100] ^= 0x80;
    let set_copy = |content: Vec<u8>| {
        let pool = pool.clone();
        let digest = digest.clone();
        async move {
            let done = sqlx::query("UPDATE registry_blob_copies SET content = $1 WHERE digest = $2")
                .bind(content)
                .bind(digest)
                .execute(&pool)
                .await
                .unwrap();
            assert_eq!(done.rows_affected(), 1, "the first gateway kept a copy");
        }
    };
    set_copy(flipped).await;
    let install = json!({"package": "copied/caller"});
    let (reason, message) = refused(&second, "installs.create", install.clone()).await;
    assert_eq!(reason, "INVALID_PARAMS");
    assert!(message.contains("does not match its digest"), "{message}");
    let kept = first
        .dir
        .path()
        .join("second-host/registry/blobs/sha256")
        .join(&digest["sha256:".len()..]);
    assert!(!kept.exists(), "nothing altered is kept");

    set_copy(skill()).await;
    let installed = op(&second, "installs.create", install).await;
    assert_eq!(installed["signature"]["verified"], true, "{installed}");
    assert_eq!(installed["signature"]["namespace"], "copied", "{installed}");
}
