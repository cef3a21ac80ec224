//! Remote MCP servers as workspace installs, against two real gateways: B
//! serves the calculator on `/v1/mcp/calc` behind its own key, and A adds it
//! with `mcp_servers.create` (a static `Authorization` header, sealed and
//! never listed). A's `/v1/mcp` lists B's tools as `remote__<tool>` and
//! calls them (so does a skill on A), logged as A's tool calls; when B ends
//! A's session, A initializes again without the caller noticing. Egress
//! policy refuses an internal URL the operator did not allow, another
//! workspace sees nothing, and a remote that never answers, or answers too
//! much, fails the call within its bounds while A keeps serving.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Gateway, admin, standard_config, start_mock};
use crate::components::{install, publish_tool_caller, run};
use crate::control_plane::helpers::method;
use crate::mcp_catalog::{publish_fixture, rpc_as};

/// A's timeout for one remote request (`components.http_timeout_ms`).
const TIMEOUT_MS: u64 = 1500;

/// Each item's `field` in the list `list` of a JSON-RPC answer.
fn strings(answer: &Value, list: &str, field: &str) -> Vec<String> {
    let items = answer["result"][list].as_array();
    let items = items.unwrap_or_else(|| panic!("no {list}: {answer}"));
    items
        .iter()
        .map(|item| item[field].as_str().unwrap().to_string())
        .collect()
}

/// The tool names `tools/list` answers on `path`.
async fn tool_names(gateway: &Gateway, key: &str, path: &str) -> Vec<String> {
    strings(
        &rpc_as(gateway, key, path, "tools/list", json!({})).await,
        "tools",
        "name",
    )
}

async fn evaluate(gateway: &Gateway, name: &str, expression: &str) -> Value {
    let params = json!({"name": name, "arguments": {"expression": expression}});
    rpc_as(gateway, &gateway.api_key, "/v1/mcp", "tools/call", params).await
}

/// Ends every MCP session B holds, as an expiry would.
async fn end_sessions(gateway: &Gateway) -> u64 {
    let url = format!(
        "sqlite://{}",
        gateway.dir.path().join("data").join("tollgate.db").display()
    );
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let ended = sqlx::query("UPDATE mcp_sessions SET ended_at_ms = 1 WHERE ended_at_ms IS NULL")
        .execute(&pool)
        .await
        .unwrap()
        .rows_affected();
    pool.close().await;
    ended
}

/// A TCP listener that accepts and never answers.
async fn silent_listener() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{address}")
}

/// An HTTP server that answers every request with 10 MB of JSON, past
/// `components.http_max_body_bytes` (4 MiB).
async fn flooding_listener() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SIZE: usize = 10 << 20;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = vec![0u8; 8192];
                let _ = socket.read(&mut request).await;
                let head =
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {SIZE}\r\n\r\n");
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&vec![b' '; SIZE]).await;
            });
        }
    });
    format!("http://{address}")
}

/// The request log's tool calls named `name`, once the background commit lands.
async fn logged_calls(gateway: &Gateway, name: &str, at_least: usize) -> Vec<Value> {
    let mut calls = Vec::new();
    for _ in 0..100 {
        let usage = method(gateway, Some(&gateway.api_key), "usage.list", json!({}))
            .await
            .unwrap();
        calls = usage["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["kind"] == "tool_call" && entry["model"] == name)
            .cloned()
            .collect();
        if calls.len() >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_mcp_server_is_served_as_a_workspace_install() {
    let mock = start_mock(Default::default()).await;
    let remote = Gateway::start(&standard_config(mock, "")).await;
    // B's installs: the calculator (`calc`) and the conformance fixture (`fx`).
    publish_fixture(&remote).await;
    let silent = silent_listener().await;
    let flood = flooding_listener().await;
    let extra = format!(
        "[components]\nallow_internal_origins = [\"{}\", \"{silent}\", \"{flood}\"]\nhttp_timeout_ms = {TIMEOUT_MS}\n",
        remote.url
    );
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let key = gateway.api_key.clone();
    let create = |params: Value| method(&gateway, Some(&key), "mcp_servers.create", params);
    let rpc = |path: &'static str, method: &'static str, params: Value| rpc_as(&gateway, &key, path, method, params);

    // Egress policy: an internal address the operator did not allow is
    // refused at create, and so is a transport the gateway does not speak.
    for url in [
        "http://127.0.0.1:9/mcp",
        "http://10.1.2.3/mcp",
        "http://169.254.169.254/mcp",
    ] {
        let refused = create(json!({"name": "blocked", "url": url, "auth": "none"})).await;
        assert!(
            format!("{refused:?}").contains("allow_internal_origins"),
            "{url}: {refused:?}"
        );
    }
    let unknown = create(json!({"name": "old", "url": format!("{}/v1/mcp/calc", remote.url),
                                "transport": "websocket", "auth": "none"}))
    .await;
    assert!(format!("{unknown:?}").contains("streamable-http, sse"), "{unknown:?}");

    // Added with B's key as a static header: shown by header, never by value.
    let bearer = format!("Bearer {}", remote.api_key);
    let created = create(json!({"name": "remote", "url": format!("{}/v1/mcp/calc", remote.url),
                                "auth": {"header": "Authorization", "value": bearer}}))
    .await
    .unwrap();
    assert_eq!(created["auth_header"], "authorization", "{created}");
    let listed = method(&gateway, Some(&key), "mcp_servers.list", json!({}))
        .await
        .unwrap();
    assert_eq!(listed["servers"][0]["name"], "remote", "{listed}");
    for shown in [&created, &listed] {
        assert!(!shown.to_string().contains(&remote.api_key), "{shown}");
    }
    let audit = method(&gateway, Some(&key), "audit.list", json!({})).await.unwrap();
    assert!(
        !audit.to_string().contains(&remote.api_key),
        "the audit log holds the credential"
    );
    // Its name is taken for component installs too.
    let clash = method(
        &gateway,
        Some(&key),
        "installs.create",
        json!({"package": "tollgate/calculator", "name": "remote"}),
    )
    .await;
    assert!(clash.is_err(), "{clash:?}");

    // B's tools on A, namespaced on /v1/mcp and plain on /v1/mcp/remote.
    let names = tool_names(&gateway, &key, "/v1/mcp").await;
    assert!(names.contains(&"remote__evaluate".to_string()), "{names:?}");
    let names = tool_names(&gateway, &key, "/v1/mcp/remote").await;
    assert_eq!(names, ["evaluate"], "{names:?}");
    let sum = evaluate(&gateway, "remote__evaluate", "2+3").await;
    assert_eq!(
        sum["result"]["content"][0],
        json!({"type": "text", "text": "5"}),
        "{sum}"
    );
    assert_eq!(sum["result"]["isError"], false, "{sum}");
    // B's own tool error comes back as B answered it.
    let failed = evaluate(&gateway, "remote__evaluate", "1/0").await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");

    // B's prompts and resources, through a second remote on B's fixture.
    create(json!({"name": "fixture", "url": format!("{}/v1/mcp/fx", remote.url),
                  "auth": {"header": "authorization", "value": bearer}}))
    .await
    .unwrap();
    let initialized = rpc(
        "/v1/mcp",
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    )
    .await;
    assert!(
        initialized["result"]["capabilities"].get("prompts").is_some(),
        "{initialized}"
    );
    let prompts = rpc("/v1/mcp", "prompts/list", json!({})).await;
    let names = strings(&prompts, "prompts", "name");
    assert!(
        names.contains(&"fixture__test_prompt_with_arguments".to_string()),
        "{prompts}"
    );
    let got = rpc(
        "/v1/mcp",
        "prompts/get",
        json!({"name": "fixture__test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
    )
    .await;
    assert_eq!(
        got["result"]["messages"][0]["content"]["text"], "Prompt with arguments: arg1='hello', arg2='world'",
        "{got}"
    );
    // B's refusal of a missing argument reaches the caller as B gave it.
    let missing = rpc(
        "/v1/mcp/fixture",
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello"}}),
    )
    .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let resources = rpc("/v1/mcp", "resources/list", json!({})).await;
    let uris = strings(&resources, "resources", "uri");
    assert!(uris.contains(&"test://static-text".to_string()), "{resources}");
    let read = rpc("/v1/mcp", "resources/read", json!({"uri": "test://static-text"})).await;
    assert_eq!(read["result"]["contents"][0]["uri"], "test://static-text", "{read}");
    let templates = rpc("/v1/mcp", "resources/templates/list", json!({})).await;
    let names = strings(&templates, "resourceTemplates", "uriTemplate");
    assert!(names.contains(&"test://template/{id}/data".to_string()), "{templates}");
    let templated = rpc("/v1/mcp", "resources/read", json!({"uri": "test://template/123/data"})).await;
    let text = templated["result"]["contents"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("\"id\":\"123\""), "{templated}");
    let complete = |reference: Value, argument: &str, value: &str| json!({"ref": reference, "argument": {"name": argument, "value": value}});
    let reference = json!({"type": "ref/prompt", "name": "fixture__test_prompt_with_arguments"});
    let cities = rpc("/v1/mcp", "completion/complete", complete(reference, "arg1", "par")).await;
    assert_eq!(
        cities["result"]["completion"]["values"],
        json!(["paris", "park", "party"]),
        "{cities}"
    );
    let reference = json!({"type": "ref/resource", "uri": "test://template/{id}/data"});
    let ids = rpc("/v1/mcp", "completion/complete", complete(reference, "id", "12")).await;
    assert_eq!(ids["result"]["completion"]["values"], json!(["123", "124"]), "{ids}");
    let nowhere = rpc("/v1/mcp", "resources/read", json!({"uri": "test://nowhere"})).await;
    assert_eq!(nowhere["error"]["code"], -32002, "{nowhere}");

    // A tool that logs makes B answer as an SSE stream; A reads the result from it.
    let logged = rpc(
        "/v1/mcp",
        "tools/call",
        json!({"name": "fixture__test_tool_with_logging", "arguments": {}}),
    )
    .await;
    assert_eq!(
        logged["result"]["content"][0]["text"], "Tool with logging executed successfully",
        "{logged}"
    );

    // B ends A's session: A initializes again and the call still works.
    assert!(end_sessions(&remote).await >= 1);
    let sum = evaluate(&gateway, "remote__evaluate", "4*5").await;
    assert_eq!(sum["result"]["content"][0]["text"], "20", "{sum}");

    // Each call is one of A's tool calls in the request log.
    let calls = logged_calls(&gateway, "remote__evaluate", 3).await;
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls.iter().filter(|call| call["status"] == 200).count() == 2,
        "{calls:?}"
    );

    // A skill calls the remote's tool as it calls a component's; the call
    // is logged inside the skill's run.
    publish_tool_caller(&gateway, "tests").await;
    install(&gateway, json!({"package": "tests/caller"})).await;
    let clash = create(json!({"name": "caller", "url": format!("{}/v1/mcp/calc", remote.url), "auth": "none"})).await;
    assert!(format!("{clash:?}").contains("caller"), "{clash:?}");
    let (status, body) = run(
        &gateway,
        json!({"tool": "remote__evaluate", "arguments": {"expression": "6*7"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"]["content"], json!(["42"]), "{body}");
    let run_id = body["service"]["request_id"].clone();
    let calls = logged_calls(&gateway, "remote__evaluate", 4).await;
    assert!(
        calls.iter().any(|call| call["parent_request_id"] == run_id),
        "{calls:?}"
    );

    // The workspace's tool guardrails check a remote's arguments and results.
    let guard = json!({"package": "tollgate/denylist", "config": {"words": "666"}, "guardrail": {"routes": ["tools"]}});
    method(&gateway, Some(&key), "guardrails.create", guard).await.unwrap();
    let refused = evaluate(&gateway, "remote__evaluate", "666+1").await;
    let text = refused["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("guardrail_denied") && text.contains("the request"),
        "{refused}"
    );
    let refused = evaluate(&gateway, "remote__evaluate", "600+66").await;
    let text = refused["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("the answer") && text.contains("666"), "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    method(&gateway, Some(&key), "guardrails.delete", json!({"name": "denylist"}))
        .await
        .unwrap();

    // Another workspace sees none of it.
    let stranger = admin(
        &gateway.config_path,
        &["create-account", "--name", "stranger", "--credit-usd", "5", "--json"],
    );
    let stranger: Value = serde_json::from_str(&stranger).unwrap();
    let stranger = stranger["api_key"].as_str().unwrap();
    let names = tool_names(&gateway, stranger, "/v1/mcp").await;
    assert!(!names.iter().any(|name| name.contains("__")), "{names:?}");
    let prompts = rpc_as(&gateway, stranger, "/v1/mcp", "prompts/list", json!({})).await;
    assert_eq!(prompts["result"]["prompts"], json!([]), "{prompts}");
    let params = json!({"name": "remote__evaluate", "arguments": {"expression": "1+1"}});
    let refused = rpc_as(&gateway, stranger, "/v1/mcp", "tools/call", params).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let scoped = gateway
        .http
        .post(format!("{}/v1/mcp/remote", gateway.url))
        .bearer_auth(stranger)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(scoped.status(), 404);

    // A remote that never answers fails the call within the timeout, and A
    // keeps serving (the other remote's tools included).
    create(json!({"name": "stuck", "url": format!("{silent}/mcp"), "auth": "none"}))
        .await
        .unwrap();
    let started = Instant::now();
    let stuck = evaluate(&gateway, "stuck__evaluate", "1+1").await;
    assert!(
        started.elapsed() < Duration::from_millis(TIMEOUT_MS * 3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(stuck["result"]["isError"], true, "{stuck}");
    let text = stuck["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("stuck") && text.contains("did not answer"), "{text}");
    // One whose answer is past the size cap fails the call the same way.
    create(json!({"name": "huge", "url": format!("{flood}/mcp"), "auth": "none"}))
        .await
        .unwrap();
    let huge = evaluate(&gateway, "huge__evaluate", "1+1").await;
    let text = huge["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("huge") && text.contains("larger than"), "{huge}");
    let names = tool_names(&gateway, &key, "/v1/mcp").await;
    assert!(names.contains(&"remote__evaluate".to_string()), "{names:?}");
    gateway.assert_still_serving().await;

    // Deleted: its tools leave A's MCP at once.
    method(&gateway, Some(&key), "mcp_servers.delete", json!({"name": "remote"}))
        .await
        .unwrap();
    let names = tool_names(&gateway, &key, "/v1/mcp").await;
    assert!(!names.iter().any(|name| name.starts_with("remote__")), "{names:?}");
}
