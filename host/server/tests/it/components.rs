//! Skills calling tools through the host's `tools` capability, against the
//! real binary: the test skill `tests/plugins/tool-caller`, published over
//! the control plane, calls the built-in calculator; each call is logged as
//! running inside the one that made it; a skill calling itself stops at the
//! depth limit with a clear error; a tool of another workspace is not found.

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::control_plane::helpers::method;

async fn install(gateway: &Gateway, params: Value) -> Value {
    method(gateway, Some(&gateway.api_key), "installs.create", params)
        .await
        .unwrap_or_else(|e| panic!("install failed: {e:?}"))
}

/// Publishes the tool-caller test skill as `<namespace>/caller@1.0.0`.
async fn publish_tool_caller(gateway: &Gateway, namespace: &str) {
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
    let encoded = base64::engine::general_purpose::STANDARD.encode(&content);
    method(
        gateway,
        Some(&gateway.api_key),
        "packages.publish",
        json!({"manifest": manifest, "content_base64": encoded}),
    )
    .await
    .unwrap_or_else(|e| panic!("publish failed: {e:?}"));
}

async fn run(gateway: &Gateway, input: Value) -> (u16, Value) {
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
