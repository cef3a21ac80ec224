//! Sampling for tool servers (tool WIT 0.4.0), against the real binary: the
//! test tool `tests/plugins/sampling-tool` asks `mock/small` through the
//! host's `models` import over `/v1/mcp`. The model call goes through the
//! gateway's own metered pipeline, is billed to the caller of the tool call
//! to the nano-USD, is logged with the tool call as its parent, and is
//! itemised on the result; a tool that keeps asking is stopped at
//! `components.max_model_calls` and fails only its own call; a key whose
//! wallet is empty gets a clear error in the tool result; a package that did
//! not declare `models` gets nothing; `initialize` says who serves sampling.

use serde_json::{Value, json};

use crate::common::{Gateway, nanos, standard_config, start_mock};
use crate::components::{install, publish};
use crate::control_plane::helpers::{method, signup};
use crate::mcp_catalog::rpc_as;

/// A cap low enough that the hostile tool meets it at once.
const MAX_MODEL_CALLS: usize = 3;

/// Publishes the sampling tool as `<namespace>/<name>@1.0.0`, declaring `capabilities`.
async fn publish_sampler(gateway: &Gateway, namespace: &str, name: &str, capabilities: Value) {
    let content = std::fs::read(tollgate_plugin_host::SAMPLING_TOOL_TEST_COMPONENT).unwrap();
    let manifest = json!({
        "schema_version": 1, "kind": "tool-server", "name": format!("{namespace}/{name}"), "version": "1.0.0",
        "license": "Apache-2.0",
        "content": {"digest": tollgate_registry::Digest::of(&content).to_string(), "size": content.len(), "media_type": "application/wasm"},
        "metadata": {"world": "tollgate:tool/tool-server@0.4.0", "capabilities": capabilities},
    });
    publish(gateway, manifest, &content).await;
}

fn posted(gateway: &Gateway) -> i64 {
    nanos(gateway.wallet()["posted_usd"].as_str().unwrap())
}

async fn call(gateway: &Gateway, key: &str, tool: &str, arguments: Value) -> Value {
    let answer = rpc_as(
        gateway,
        key,
        "/v1/mcp",
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await;
    answer["result"].clone()
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

/// The request-log rows of `key`'s workspace that `filter` keeps, once there
/// are `count` of them (a tool call's row is committed in the background).
async fn rows(gateway: &Gateway, key: &str, count: usize, filter: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut found = Vec::new();
    for _ in 0..100 {
        let usage = method(gateway, Some(key), "usage.list", json!({})).await.unwrap();
        found = usage["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| filter(row))
            .cloned()
            .collect();
        if found.len() >= count {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_model_call_is_metered_billed_to_its_caller_logged_inside_it_and_bounded() {
    let mock = start_mock(Default::default()).await;
    let extra = format!("[components]\nmax_model_calls = {MAX_MODEL_CALLS}\n");
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let key = gateway.api_key.clone();
    method(&gateway, Some(&key), "namespaces.create", json!({"name": "sx"}))
        .await
        .unwrap();
    publish_sampler(&gateway, "sx", "sampler", json!(["models"])).await;
    publish_sampler(&gateway, "sx", "ungranted", json!([])).await;
    install(&gateway, json!({"package": "sx/sampler", "name": "sampler"})).await;
    install(&gateway, json!({"package": "sx/ungranted", "name": "ungranted"})).await;

    // initialize says sampling is the gateway's, never the client's.
    let initialize =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let initialized = rpc_as(&gateway, &key, "/v1/mcp", "initialize", initialize).await;
    let sampling = &initialized["result"]["capabilities"]["experimental"]["dev.tollgate/sampling"];
    assert_eq!(sampling["servedBy"], "gateway", "{initialized}");
    assert_eq!(sampling["clientSampling"], false, "{initialized}");
    let instructions = initialized["result"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("never sends sampling/createMessage"),
        "{instructions}"
    );

    // The tool's answer holds the model's text; the wallet moves by exactly
    // the model call's cost: 6 prompt tokens × 0.50 + 4 completion × 1.50
    // per million is 9,000 nano-USD.
    let before = posted(&gateway);
    let result = call(
        &gateway,
        &key,
        "sampler__ask",
        json!({"model": "mock/small", "prompt": "say hello"}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text_of(&result), "You said: say hello");
    assert_eq!(
        before - posted(&gateway),
        9_000,
        "the wallet pays the model call, exactly"
    );

    // Itemised on the result, and in the request log as a chat row whose
    // parent is the tool call.
    let service = &result["_meta"]["dev.tollgate/service"];
    assert_eq!(service["cost_usd"], "0.000009000", "{result}");
    let items = service["model_calls"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{result}");
    assert_eq!(items[0]["model"], "mock/small");
    let tool_call_id = service["request_id"].as_str().unwrap().to_string();
    let model_id = items[0]["request_id"].as_str().unwrap().to_string();
    let tool_rows = rows(&gateway, &key, 1, |row| row["request_id"] == tool_call_id.as_str()).await;
    assert_eq!(tool_rows.len(), 1);
    assert_eq!(tool_rows[0]["kind"], "tool_call");
    assert_eq!(tool_rows[0]["model"], "sampler__ask");
    let model_rows = rows(&gateway, &key, 1, |row| row["request_id"] == model_id.as_str()).await;
    assert_eq!(model_rows.len(), 1);
    assert_eq!(model_rows[0]["kind"], "chat", "{}", model_rows[0]);
    assert_eq!(model_rows[0]["parent_request_id"], tool_call_id.as_str());
    assert_eq!(nanos(model_rows[0]["cost_usd"].as_str().unwrap()), 9_000);

    // A tool that asks without end is refused past the cap, then stopped by
    // the sandbox: its call fails, and only the capped calls were paid,
    // each 5 prompt × 0.50 + 3 completion × 1.50 = 7,000 nano-USD.
    let before = posted(&gateway);
    let result = call(&gateway, &key, "sampler__spend", json!({"model": "mock/small"})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(&result).contains("exceeded its"), "{result}");
    let service = &result["_meta"]["dev.tollgate/service"];
    assert_eq!(
        service["model_calls"].as_array().unwrap().len(),
        MAX_MODEL_CALLS,
        "{result}"
    );
    let spend_id = service["request_id"].as_str().unwrap().to_string();
    let spent = rows(&gateway, &key, MAX_MODEL_CALLS, |row| {
        row["parent_request_id"] == spend_id.as_str() && row["kind"] == "chat"
    })
    .await;
    assert_eq!(spent.len(), MAX_MODEL_CALLS);
    assert_eq!(before - posted(&gateway), 7_000 * MAX_MODEL_CALLS as i64);
    // Only that call failed: the next one works.
    let result = call(
        &gateway,
        &key,
        "sampler__ask",
        json!({"model": "mock/small", "prompt": "still there"}),
    )
    .await;
    assert_eq!(text_of(&result), "You said: still there", "{result}");

    // A package that did not declare `models` is granted none, though its
    // world imports them: nothing is called or paid.
    let before = posted(&gateway);
    let result = call(
        &gateway,
        &key,
        "ungranted__ask",
        json!({"model": "mock/small", "prompt": "hi"}),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(&result).contains("403 capability_not_granted"), "{result}");
    assert_eq!(posted(&gateway), before);

    // A key whose wallet is empty gets the refusal in the tool result.
    let broke = signup(&gateway, "broke@sampling.test").await;
    method(
        &gateway,
        Some(&broke.key),
        "installs.create",
        json!({"package": "sx/sampler", "name": "sampler"}),
    )
    .await
    .unwrap();
    let result = call(
        &gateway,
        &broke.key,
        "sampler__ask",
        json!({"model": "mock/small", "prompt": "hi"}),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(&result).contains("402 insufficient_balance"), "{result}");
    gateway.assert_still_serving().await;
}
