//! Skills calling tools through the host's `tools` capability, against the
//! real binary: the test skill `tests/plugins/tool-caller`, published over
//! the control plane, calls the built-in calculator; each call is logged as
//! running inside the one that made it; a skill calling itself stops at the
//! depth limit with a clear error; a tool of another workspace is not found.

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::control_plane::helpers::method;

pub(crate) async fn install(gateway: &Gateway, params: Value) -> Value {
    method(gateway, Some(&gateway.api_key), "installs.create", params)
        .await
        .unwrap_or_else(|e| panic!("install failed: {e:?}"))
}

/// Publishes `content` under `manifest` with the gateway's key.
pub(crate) async fn publish(gateway: &Gateway, manifest: Value, content: &[u8]) {
    let encoded = base64::engine::general_purpose::STANDARD.encode(content);
    method(
        gateway,
        Some(&gateway.api_key),
        "packages.publish",
        json!({"manifest": manifest, "content_base64": encoded}),
    )
    .await
    .unwrap_or_else(|e| panic!("publish failed: {e:?}"));
}

/// Publishes the tool-caller test skill as `<namespace>/caller@1.0.0`.
pub(crate) async fn publish_tool_caller(gateway: &Gateway, namespace: &str) {
    let content = std::fs::read(tollgate_plugin_host::TOOL_CALLER_TEST_COMPONENT).unwrap();
    method(
        gateway,
        Some(&gateway.api_key),
        "namespaces.create",
        json!({"name": namespace}),
    )
    .await
    .unwrap();
    let manifest = json!({
        "schema_version": 1,
        "kind": "skill",
        "name": format!("{namespace}/caller"),
        "version": "1.0.0",
        "license": "Apache-2.0",
        "content": {
            "digest": tollgate_registry::Digest::of(&content).to_string(),
            "size": content.len(),
            "media_type": "application/wasm",
        },
        "metadata": {"world": "tollgate:skill/skill@0.1.0", "capabilities": ["tools"]},
    });
    publish(gateway, manifest, &content).await;
}

pub(crate) async fn run(gateway: &Gateway, input: Value) -> (u16, Value) {
    let response = gateway
        .post("/v1/skills/caller")
        .json(&json!({ "input": input }))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_calls_tools_of_its_workspace_nested_calls_are_linked_and_depth_limited() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    publish_tool_caller(&gateway, "tests").await;
    install(&gateway, json!({"package": "tests/caller"})).await;
    install(&gateway, json!({"package": "tollgate/calculator"})).await;

    // The skill calls the calculator through the host.
    let (status, body) = run(
        &gateway,
        json!({"tool": "calculator__evaluate", "arguments": {"expression": "2*(3+4)"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"]["content"], json!(["14"]));
    let run_id = body["service"]["request_id"].as_str().unwrap().to_string();

    // Both are in the request log: the tool call names the run it ran inside.
    let usage = method(&gateway, Some(&gateway.api_key), "usage.list", json!({}))
        .await
        .unwrap();
    let entries = usage["entries"].as_array().unwrap();
    let by_kind = |kind: &str| -> Vec<&Value> { entries.iter().filter(|e| e["kind"] == kind).collect() };
    let runs = by_kind("skill_run");
    assert_eq!(runs.len(), 1, "{usage}");
    assert_eq!(runs[0]["request_id"], run_id.as_str());
    // The tool call's row is committed in the background: wait for it.
    let mut tool_calls = Vec::new();
    for _ in 0..50 {
        let usage = method(&gateway, Some(&gateway.api_key), "usage.list", json!({}))
            .await
            .unwrap();
        tool_calls = usage["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "tool_call")
            .cloned()
            .collect();
        if !tool_calls.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0]["model"], "calculator__evaluate");
    assert_eq!(tool_calls[0]["parent_request_id"], run_id.as_str());
    assert_eq!(tool_calls[0]["status"], 200);

    // A failing tool comes back to the skill as a tool error, and from it as 422.
    let (status, body) = run(
        &gateway,
        json!({"tool": "calculator__evaluate", "arguments": {"expression": "1/0"}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("division by zero"),
        "{body}"
    );

    // Calling itself again and again stops at the depth limit (4), cleanly.
    let mut input = json!({"tool": "calculator__evaluate", "arguments": {"expression": "1"}});
    for _ in 0..6 {
        input = json!({"tool": "caller__run", "arguments": input});
    }
    let (status, body) = run(&gateway, input).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nest at most 4 deep"),
        "{body}"
    );

    // Only this workspace's tools: another workspace's key finds none.
    let other = crate::control_plane::helpers::signup(&gateway, "other@components.test").await;
    method(
        &gateway,
        Some(&other.key),
        "installs.create",
        json!({"package": "tests/caller"}),
    )
    .await
    .unwrap();
    let response = gateway
        .http
        .post(format!("{}/v1/skills/caller", gateway.url))
        .bearer_auth(&other.key)
        .json(&json!({"input": {"tool": "calculator__evaluate", "arguments": {"expression": "1"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 422);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no tool 'calculator__evaluate'"),
        "{body}"
    );
    gateway.assert_still_serving().await;
}

/// A local server that records the `x-api-key` header of each request.
async fn key_recorder() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>) {
    use axum::http::HeaderMap;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = seen.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let recorded = recorded.clone();
        async move {
            let key = headers.get("x-api-key").map(|v| v.to_str().unwrap().to_string());
            recorded.lock().unwrap().push(key);
            "recorded"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_credentials_are_sealed_at_rest_shown_by_name_and_placed_by_the_host() {
    const SECRET: &str = "sk-install-credential-0123456789";
    let mock = start_mock(Default::default()).await;
    let (origin, seen) = key_recorder().await;
    // The recorder is on loopback, which only the operator can open to components.
    let gateway = Gateway::start(&standard_config(
        mock,
        &format!("[components]\nallow_internal_origins = [\"{origin}\"]\n"),
    ))
    .await;
    let host = origin.trim_start_matches("http://").to_string();

    // The hostile test tool, published with the http capability for this host.
    let content = std::fs::read(tollgate_plugin_host::HOSTILE_TOOL_TEST_COMPONENT).unwrap();
    method(
        &gateway,
        Some(&gateway.api_key),
        "namespaces.create",
        json!({"name": "creds"}),
    )
    .await
    .unwrap();
    let manifest = json!({
        "schema_version": 1, "kind": "tool-server", "name": "creds/fetcher", "version": "1.0.0",
        "license": "Apache-2.0",
        "content": {"digest": tollgate_registry::Digest::of(&content).to_string(), "size": content.len(), "media_type": "application/wasm"},
        "metadata": {"world": "tollgate:tool/tool-server@0.1.0", "capabilities": ["http"], "allowed_hosts": [host]},
    });
    publish(&gateway, manifest, &content).await;

    // A credential for an origin the install was not given is refused.
    let refused = method(
        &gateway,
        Some(&gateway.api_key),
        "installs.create",
        json!({"package": "creds/fetcher", "origins": [origin],
               "credentials": {"key": {"value": SECRET, "placement": "header:x-api-key", "origins": ["https://elsewhere.test"]}}}),
    )
    .await;
    assert_eq!(refused.unwrap_err().0, "INVALID_PARAMS");

    let installed = install(
        &gateway,
        json!({"package": "creds/fetcher", "origins": [origin],
               "credentials": {"key": {"value": SECRET, "placement": "header:x-api-key"}}}),
    )
    .await;
    assert_eq!(
        installed["credentials"],
        json!({"key": {"placement": "header:x-api-key", "origins": [origin]}})
    );
    assert!(!installed.to_string().contains(SECRET), "the value is never shown");

    // The component names the credential; the host puts it on the request.
    let call = |arguments: Value| {
        gateway
            .post("/v1/mcp")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "fetcher__fetch", "arguments": arguments}}))
    };
    let answer: Value = call(json!({"url": format!("{origin}/data"), "credential": "key"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "200 recorded", "{answer}");
    assert_eq!(seen.lock().unwrap().clone(), vec![Some(SECRET.to_string())]);
    assert!(!answer.to_string().contains(SECRET));

    // At rest the value is sealed: neither the database nor its journal holds it.
    for file in ["tollgate.db", "tollgate.db-wal"] {
        let path = gateway.dir.path().join("data").join(file);
        if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{} holds the credential in the clear",
                path.display()
            );
        }
    }
    let key_file = gateway.dir.path().join("data").join("credentials.key");
    assert_eq!(std::fs::metadata(&key_file).unwrap().len(), 32);

    // An update without credentials keeps them; one with an empty set drops them.
    let kept = method(
        &gateway,
        Some(&gateway.api_key),
        "installs.update",
        json!({"name": "fetcher", "config": {"a": "b"}}),
    )
    .await
    .unwrap();
    assert_eq!(kept["credentials"]["key"]["placement"], "header:x-api-key");
    let dropped = method(
        &gateway,
        Some(&gateway.api_key),
        "installs.update",
        json!({"name": "fetcher", "credentials": {}}),
    )
    .await
    .unwrap();
    assert_eq!(dropped["credentials"], json!({}));
    let answer: Value = call(json!({"url": format!("{origin}/data"), "credential": "key"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["result"]["isError"], true);
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no credential 'key'"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_mcp_and_install_input_gets_clear_errors_and_the_gateway_keeps_serving() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    install(&gateway, json!({"package": "tollgate/calculator"})).await;
    let mcp = |body: &'static str| gateway.post("/v1/mcp").body(body).send();
    let code = |answer: &Value| answer["error"]["code"].as_i64().unwrap();

    let response = mcp("{not json").await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(code(&response.json().await.unwrap()), -32700);

    let answer: Value = mcp(r#"[1]"#).await.unwrap().json().await.unwrap();
    assert_eq!(code(&answer[0]), -32600, "{answer}");

    let answer: Value = mcp(r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"x://y"}}"#)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(code(&answer), -32601);

    let answer: Value = mcp(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope__x"}}"#)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(code(&answer), -32602);
    assert_eq!(answer["id"], 2);

    let answer: Value = mcp(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calculator__evaluate","arguments":[1]}}"#,
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(code(&answer), -32602);

    let response = gateway
        .post("/v1/mcp")
        .header("mcp-protocol-version", "1999-01-01")
        .body(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let answer: Value = response.json().await.unwrap();
    assert_eq!((code(&answer), answer["id"].clone()), (-32600, json!(4)));

    let response = gateway.post("/v1/mcp/missing").body("{}").send().await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let response = gateway.get("/v1/mcp").send().await.unwrap();
    assert_eq!(response.status().as_u16(), 405);

    // Install params that make no sense are INVALID_PARAMS with a reason.
    for params in [
        json!({"package": "not a name"}),
        json!({"package": "tollgate/calculator", "version": "^^1", "name": "c2"}),
        json!({"package": "tollgate/calculator", "name": "Bad_Name"}),
        json!({"package": "tollgate/http-fetch", "origins": ["file:///etc/passwd"]}),
        json!({"package": "tollgate/calculator", "name": "c3", "origins": ["https://example.com"]}),
        json!({"package": "tollgate/openai-compatible", "name": "adapter"}),
    ] {
        let (reason, message) = method(&gateway, Some(&gateway.api_key), "installs.create", params.clone())
            .await
            .unwrap_err();
        assert_eq!(reason, "INVALID_PARAMS", "{params}: {message}");
        assert!(!message.is_empty());
    }
    let (reason, _) = method(
        &gateway,
        Some(&gateway.api_key),
        "installs.create",
        json!({"package": "tollgate/calculator"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "ALREADY_EXISTS");

    let answer: Value = mcp(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"calculator__evaluate","arguments":{"expression":"6*7"}}}"#,
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "42", "still serving");
    gateway.assert_still_serving().await;
}
