//! The CLI as a control-plane client, end to end against a running server.

use serde_json::Value;

use super::helpers::*;

/// Runs `tollgate ARGS` as a control-plane client with `env`; returns
/// (success, stdout, stderr).
fn cli(env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(crate::common::BIN)
        .args(args)
        .env_remove("TOLLGATE_URL")
        .env_remove("TOLLGATE_API_KEY")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test]
async fn the_cli_drives_the_control_plane_end_to_end() {
    let gateway = gateway().await;
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("profiles.toml");
    let profiles = profiles.to_str().unwrap();
    let base = [("TOLLGATE_PROFILE_FILE", profiles)];

    // signup --save stores the URL and key in the profile file.
    let (ok, out, err) = cli(
        &base,
        &[
            "signup",
            "--url",
            &gateway.url,
            "--name",
            "Cli",
            "--email",
            "cli@example.com",
            "--save",
            "--json",
        ],
    );
    assert!(ok, "{out}{err}");
    let account: Value = serde_json::from_str(&out).unwrap();
    let saved = std::fs::read_to_string(profiles).unwrap();
    assert!(saved.contains(account["api_key"].as_str().unwrap()) && saved.contains(&gateway.url));

    // From here on the profile supplies URL and key.
    let json = |args: &[&str]| {
        let mut args = args.to_vec();
        args.push("--json");
        let (ok, out, err) = cli(&base, &args);
        assert!(ok, "{args:?}: {out}{err}");
        serde_json::from_str::<Value>(&out).unwrap()
    };
    let created = json(&["workspaces", "create", "research"]);
    let research = created["workspace_id"].as_str().unwrap();
    let listed = json(&["workspaces", "list"]);
    assert_eq!(listed["workspaces"].as_array().unwrap().len(), 2);
    assert_eq!(json(&["workspaces", "get", research])["name"], "research");
    assert_eq!(json(&["workspaces", "rename", research, "lab"])["name"], "lab");
    assert_eq!(
        json(&["namespaces", "create", "team-a", "--workspace", research])["name"],
        "team-a"
    );
    assert_eq!(
        json(&["namespaces", "list", "--workspace", research])["namespaces"][0]["name"],
        "team-a"
    );
    cli(
        &base,
        &[
            "signup",
            "--url",
            &gateway.url,
            "--name",
            "Bob",
            "--email",
            "bob@example.com",
        ],
    );
    let bob = json(&["members", "add", "bob@example.com", "--role", "developer"]);
    let bob_id = bob["user_id"].as_str().unwrap();
    assert_eq!(
        json(&["members", "set-role", bob_id, "--role", "viewer"])["role"],
        "viewer"
    );
    assert_eq!(json(&["members", "list"])["members"].as_array().unwrap().len(), 2);
    json(&["members", "remove", bob_id]);
    let key = json(&["keys", "create", "--name", "ci"]);
    let key_id = key["key_id"].as_str().unwrap();
    assert_eq!(json(&["keys", "list"])["keys"].as_array().unwrap().len(), 2);
    let limited = json(&["keys", "create", "--name", "bot", "--tools", "calc,fx__echo"]);
    assert_eq!(limited["tools"], serde_json::json!(["calc", "fx__echo"]));
    let limited_id = limited["key_id"].as_str().unwrap();
    let narrowed = json(&["keys", "set-tools", limited_id, "--tools", "calc"]);
    assert_eq!(narrowed["tools"], serde_json::json!(["calc"]));
    assert_eq!(
        json(&["keys", "set-tools", limited_id, "--clear"])["tools"],
        Value::Null
    );
    let (ok, _, err) = cli(&base, &["keys", "set-tools", limited_id]);
    assert!(!ok && err.contains("--tools"), "{err}");
    json(&["keys", "revoke", limited_id]);
    gateway.admin(&[
        "credit",
        "--workspace",
        account["workspace_id"].as_str().unwrap(),
        "--usd",
        "1",
    ]);
    let (status, _, chat) = chat_with(&gateway, key["api_key"].as_str().unwrap()).await;
    assert_eq!(status, 200);
    let usage = json(&["usage", "--key", key_id, "--limit", "5"]);
    assert_eq!(usage["entries"][0]["request_id"], chat["service"]["request_id"]);
    let posted = crate::common::nanos(json(&["wallet"])["posted_usd"].as_str().unwrap());
    let cost = crate::common::nanos(usage["entries"][0]["cost_usd"].as_str().unwrap());
    assert!(cost > 0);
    assert_eq!(posted + cost, 1_000_000_000);
    let request_id = chat["service"]["request_id"].as_str().unwrap();
    assert_eq!(json(&["request", request_id])["request_id"], request_id);
    // Plans: the list, the workspace's plan, the month; a priced plan needs an operator.
    let plans = json(&["plan", "list"]);
    assert!(
        plans["plans"].as_array().unwrap().iter().any(|p| p["id"] == "team"),
        "{plans}"
    );
    assert_eq!(json(&["plan", "show"])["plan"]["id"], "free");
    assert_eq!(json(&["plan", "usage"])["monthly_requests"], 1000);
    assert_eq!(json(&["plan", "change", "free"])["plan"]["id"], "free");
    let (ok, _, err) = cli(&base, &["plan", "change", "team"]);
    assert!(!ok && err.contains("FAILED_PRECONDITION"), "{err}");
    json(&["keys", "revoke", key_id]);
    assert_eq!(chat_with(&gateway, key["api_key"].as_str().unwrap()).await.0, 401);
    json(&["workspaces", "delete", research]);

    // Human output: a table for lists, fields otherwise.
    let (ok, out, _) = cli(&base, &["keys", "list"]);
    assert!(ok);
    assert!(out.lines().next().unwrap().contains("KEY_ID"), "{out}");
    let (ok, out, _) = cli(&base, &["wallet"]);
    assert!(ok && out.contains("available_usd"), "{out}");

    // Environment beats the profile; errors exit non-zero with the reason.
    let (ok, _, err) = cli(
        &[
            ("TOLLGATE_PROFILE_FILE", profiles),
            ("TOLLGATE_API_KEY", &gateway.api_key),
        ],
        &["workspaces", "get", research],
    );
    assert!(!ok);
    assert!(err.contains("NOT_FOUND"), "{err}");
    let (ok, out, _) = cli(
        &[
            ("TOLLGATE_PROFILE_FILE", profiles),
            ("TOLLGATE_API_KEY", &gateway.api_key),
        ],
        &["wallet", "--json"],
    );
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["available_usd"],
        "100.000000000"
    );
    let (ok, _, err) = cli(
        &[("TOLLGATE_PROFILE_FILE", profiles)],
        &["wallet", "--url", "http://127.0.0.1:1"],
    );
    assert!(!ok && err.contains("cannot reach"), "{err}");
}
