//! `tollgate mcp-servers add|list|remove` run as a binary against a test
//! gateway: a remote added with a static header whose value comes from an
//! environment variable reaches the remote, its tools join `/v1/mcp`, the
//! secret is never printed, and removal takes them away.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::common::{BIN, Gateway, standard_config, start_mock};
use crate::mcp_catalog::rpc_as;

const SECRET: &str = "Bearer remote-secret-4b1d";

/// A minimal MCP server on loopback with one tool, `ping`; it records the
/// `Authorization` header of every request it gets.
async fn remote() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let handler = move |headers: HeaderMap, Json(message): Json<Value>| {
        let record = record.clone();
        async move {
            let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
            record.lock().unwrap().push(auth.unwrap_or_default().to_string());
            let result = match message["method"].as_str() {
                Some("initialize") => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                             "serverInfo": {"name": "fixture", "version": "1"}}),
                Some("tools/list") => json!({"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}),
                _ if message.get("id").is_none() => return StatusCode::ACCEPTED.into_response(),
                _ => json!({}),
            };
            Json(json!({"jsonrpc": "2.0", "id": message["id"], "result": result})).into_response()
        }
    };
    let app = axum::Router::new().route("/mcp", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), seen)
}

/// Runs `tollgate ARGS` against `gateway` with its key; (success, stdout, stderr).
fn cli(gateway: &Gateway, env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(BIN)
        .args(args)
        .env("TOLLGATE_URL", &gateway.url)
        .env("TOLLGATE_API_KEY", &gateway.api_key)
        .env("TOLLGATE_PROFILE_FILE", gateway.dir.path().join("no-profiles.toml"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

async fn tool_names(gateway: &Gateway) -> Vec<String> {
    let answer = rpc_as(gateway, &gateway.api_key, "/v1/mcp", "tools/list", json!({})).await;
    let tools = answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

// The CLI blocks this thread while the gateway may call the remote, which
// runs on this runtime: it needs a second worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_add_list_and_remove_from_the_cli_without_echoing_the_secret() {
    let (origin, seen) = remote().await;
    let mock = start_mock(Default::default()).await;
    let extra = format!("[components]\nallow_internal_origins = [\"{origin}\"]\n");
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let url = format!("{origin}/mcp");

    // A variable that is not set fails before anything is sent, naming it.
    let (ok, out, err) = cli(
        &gateway,
        &[],
        &[
            "mcp-servers",
            "add",
            "fixture",
            &url,
            "--header",
            "authorization",
            "--value-env",
            "UNSET_FOR_TEST",
        ],
    );
    assert!(!ok && err.contains("UNSET_FOR_TEST"), "{out}{err}");
    // The header needs the variable that holds its value, not the value.
    let (ok, _, err) = cli(
        &gateway,
        &[],
        &["mcp-servers", "add", "fixture", &url, "--header", "authorization"],
    );
    assert!(!ok && err.contains("--value-env"), "{err}");

    let env = [("FIXTURE_AUTH", SECRET)];
    let (ok, out, err) = cli(
        &gateway,
        &env,
        &[
            "mcp-servers",
            "add",
            "fixture",
            &url,
            "--header",
            "authorization",
            "--value-env",
            "FIXTURE_AUTH",
        ],
    );
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("fixture") && !out.contains(SECRET) && !err.contains(SECRET),
        "{out}{err}"
    );

    let (ok, out, err) = cli(&gateway, &[], &["mcp-servers", "list", "--json"]);
    assert!(ok, "{out}{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let server = &listed["servers"][0];
    assert_eq!(
        (server["name"].as_str(), server["url"].as_str()),
        (Some("fixture"), Some(url.as_str()))
    );
    assert_eq!(server["auth_header"], "authorization");
    assert!(!out.contains(SECRET), "{out}");

    // The remote's tool joins /v1/mcp, and the remote got the secret.
    assert!(tool_names(&gateway).await.contains(&"fixture__ping".to_string()));
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty() && seen.iter().all(|auth| auth == SECRET), "{seen:?}");

    let (ok, out, err) = cli(&gateway, &[], &["mcp-servers", "remove", "fixture"]);
    assert!(ok, "{out}{err}");
    assert!(
        !tool_names(&gateway)
            .await
            .iter()
            .any(|name| name.starts_with("fixture__"))
    );
    let (ok, out, _) = cli(&gateway, &[], &["mcp-servers", "list", "--json"]);
    assert!(ok);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["servers"], json!([]));
    // Removing it again names what is missing.
    let (ok, _, err) = cli(&gateway, &[], &["mcp-servers", "remove", "fixture"]);
    assert!(!ok && err.contains("fixture"), "{err}");
}
