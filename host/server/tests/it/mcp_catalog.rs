//! Tool WIT 0.2.0 over MCP, against the real binary: the conformance
//! fixture (`tests/plugins/mcp-tool`), published and installed beside the
//! built-in calculator (0.1.0), answers images, audio and embedded
//! resources, reports progress on an SSE answer with the client's token
//! echoed as sent, and serves prompts, resources, templates and completion,
//! namespaced on `/v1/mcp` and plain on `/v1/mcp/{install}`; the 0.1.0
//! server keeps working and declares none of it.

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::components::{install, publish};
use crate::control_plane::helpers::method;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

pub(crate) async fn publish_fixture(gateway: &Gateway) {
    let content = std::fs::read(tollgate_plugin_host::MCP_TOOL_TEST_COMPONENT).unwrap();
    method(
        gateway,
        Some(&gateway.api_key),
        "namespaces.create",
        json!({"name": "fx"}),
    )
    .await
    .unwrap();
    let manifest = json!({
        "schema_version": 1, "kind": "tool-server", "name": "fx/conformance", "version": "1.0.0",
        "license": "Apache-2.0",
        "content": {"digest": tollgate_registry::Digest::of(&content).to_string(), "size": content.len(), "media_type": "application/wasm"},
        "metadata": {"world": "tollgate:tool/tool-server@0.3.0"},
    });
    publish(gateway, manifest, &content).await;
    install(gateway, json!({"package": "fx/conformance", "name": "fx"})).await;
    install(gateway, json!({"package": "tollgate/calculator", "name": "calc"})).await;
}

/// One JSON-RPC request on `path` with the gateway's key, answered as JSON.
async fn rpc(gateway: &Gateway, path: &str, method: &str, params: Value) -> Value {
    rpc_as(gateway, &gateway.api_key, path, method, params).await
}

/// One JSON-RPC request on `path` with `key`, answered as JSON.
pub(crate) async fn rpc_as(gateway: &Gateway, key: &str, path: &str, method: &str, params: Value) -> Value {
    let response = gateway
        .http
        .post(format!("{}{path}", gateway.url))
        .bearer_auth(key)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{method} on {path}");
    response.json().await.unwrap()
}

/// A `prompts/get` refused as invalid params for lacking `argument`.
pub(crate) fn assert_needs(answer: &Value, argument: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains(argument), "{answer}");
}

fn decoded(data: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(data.as_str().unwrap())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_2_0_tool_server_answers_rich_content_and_serves_prompts_resources_and_completion() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    publish_fixture(&gateway).await;

    // Capabilities are declared where they are served: not on the 0.1.0 install.
    let initialize =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let all = rpc(&gateway, "/v1/mcp", "initialize", initialize.clone()).await;
    let capabilities = &all["result"]["capabilities"];
    assert_eq!(capabilities["prompts"], json!({"listChanged": false}), "{all}");
    assert_eq!(capabilities["resources"]["subscribe"], false, "{all}");
    assert_eq!(capabilities["completions"], json!({}), "{all}");
    let calc = rpc(&gateway, "/v1/mcp/calc", "initialize", initialize).await;
    let capabilities = calc["result"]["capabilities"].as_object().unwrap();
    assert!(capabilities.contains_key("tools"), "{calc}");
    for absent in ["prompts", "resources", "completions"] {
        assert!(!capabilities.contains_key(absent), "{absent}: {calc}");
    }

    // Both versions' tools, side by side; the 0.1.0 one still answers.
    let tools = rpc(&gateway, "/v1/mcp", "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"calc__evaluate") && names.contains(&"fx__test_image_content"),
        "{names:?}"
    );
    let sum = rpc(
        &gateway,
        "/v1/mcp",
        "tools/call",
        json!({"name": "calc__evaluate", "arguments": {"expression": "2+3"}}),
    )
    .await;
    assert_eq!(
        sum["result"]["content"][0],
        json!({"type": "text", "text": "5"}),
        "{sum}"
    );

    // Text, image and an embedded resource in one answer.
    let mixed = rpc(
        &gateway,
        "/v1/mcp",
        "tools/call",
        json!({"name": "fx__test_multiple_content_types"}),
    )
    .await;
    let content = &mixed["result"]["content"];
    assert_eq!(content[0]["type"], "text", "{mixed}");
    assert_eq!(content[1]["type"], "image", "{mixed}");
    assert_eq!(content[1]["mimeType"], "image/png");
    assert!(decoded(&content[1]["data"]).starts_with(PNG_SIGNATURE));
    assert_eq!(
        content[2],
        json!({"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}})
    );
    let audio = rpc(
        &gateway,
        "/v1/mcp/fx",
        "tools/call",
        json!({"name": "test_audio_content"}),
    )
    .await;
    let part = &audio["result"]["content"][0];
    assert_eq!(
        (part["type"].as_str(), part["mimeType"].as_str()),
        (Some("audio"), Some("audio/wav")),
        "{audio}"
    );
    assert!(decoded(&part["data"]).starts_with(b"RIFF"));

    // Prompts: namespaced on /v1/mcp, plain on the install's endpoint.
    let prompts = rpc(&gateway, "/v1/mcp", "prompts/list", json!({})).await;
    let listed = prompts["result"]["prompts"].as_array().unwrap();
    assert_eq!(listed.len(), 4, "{prompts}");
    let with_arguments = listed
        .iter()
        .find(|p| p["name"] == "fx__test_prompt_with_arguments")
        .unwrap();
    assert_eq!(with_arguments["arguments"][0]["name"], "arg1");
    assert_eq!(with_arguments["arguments"][0]["required"], true);
    assert!(listed.iter().all(|p| !p["description"].as_str().unwrap().is_empty()));
    let plain = rpc(&gateway, "/v1/mcp/fx", "prompts/list", json!({})).await;
    assert!(
        plain["result"]["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "test_simple_prompt"),
        "{plain}"
    );
    let empty = rpc(&gateway, "/v1/mcp/calc", "prompts/list", json!({})).await;
    assert_eq!(empty["result"]["prompts"], json!([]), "{empty}");

    let got = rpc(
        &gateway,
        "/v1/mcp",
        "prompts/get",
        json!({"name": "fx__test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
    )
    .await;
    assert_eq!(
        got["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='hello', arg2='world'"}}])
    );
    let missing = rpc(
        &gateway,
        "/v1/mcp",
        "prompts/get",
        json!({"name": "fx__test_prompt_with_arguments", "arguments": {"arg1": "hello"}}),
    )
    .await;
    assert_needs(&missing, "arg2");
    let image = rpc(
        &gateway,
        "/v1/mcp/fx",
        "prompts/get",
        json!({"name": "test_prompt_with_image"}),
    )
    .await;
    assert_eq!(image["result"]["messages"][0]["content"]["type"], "image", "{image}");
    let unknown = rpc(&gateway, "/v1/mcp", "prompts/get", json!({"name": "calc__evaluate"})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    // Resources: listed, templated, read as text or blob; unknown is -32002.
    let resources = rpc(&gateway, "/v1/mcp", "resources/list", json!({})).await;
    let uris: Vec<&str> = resources["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(
        uris.contains(&"test://static-text") && uris.contains(&"test://static-binary"),
        "{resources}"
    );
    let templates = rpc(&gateway, "/v1/mcp", "resources/templates/list", json!({})).await;
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"], "test://template/{id}/data",
        "{templates}"
    );
    let binary = rpc(
        &gateway,
        "/v1/mcp",
        "resources/read",
        json!({"uri": "test://static-binary"}),
    )
    .await;
    let contents = &binary["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "image/png", "{binary}");
    assert!(decoded(&contents["blob"]).starts_with(PNG_SIGNATURE));
    let templated = rpc(
        &gateway,
        "/v1/mcp",
        "resources/read",
        json!({"uri": "test://template/123/data"}),
    )
    .await;
    let text = templated["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(text.contains("\"id\":\"123\""), "{templated}");
    let nowhere = rpc(&gateway, "/v1/mcp", "resources/read", json!({"uri": "test://nowhere"})).await;
    assert_eq!(nowhere["error"]["code"], -32002, "{nowhere}");
    let elsewhere = rpc(
        &gateway,
        "/v1/mcp/calc",
        "resources/read",
        json!({"uri": "test://static-text"}),
    )
    .await;
    assert_eq!(
        elsewhere["error"]["code"], -32002,
        "another install's resource: {elsewhere}"
    );

    // Completion, for a prompt's argument and a template's.
    let complete = |reference: Value, argument: &str, value: &str| json!({"ref": reference, "argument": {"name": argument, "value": value}});
    let cities = rpc(
        &gateway,
        "/v1/mcp",
        "completion/complete",
        complete(
            json!({"type": "ref/prompt", "name": "fx__test_prompt_with_arguments"}),
            "arg1",
            "par",
        ),
    )
    .await;
    assert_eq!(
        cities["result"]["completion"],
        json!({"values": ["paris", "park", "party"], "total": 3, "hasMore": false})
    );
    let ids = rpc(
        &gateway,
        "/v1/mcp/fx",
        "completion/complete",
        complete(
            json!({"type": "ref/resource", "uri": "test://template/{id}/data"}),
            "id",
            "12",
        ),
    )
    .await;
    assert_eq!(ids["result"]["completion"]["values"], json!(["123", "124"]), "{ids}");
}

/// The `data:` messages of an SSE body.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_client_that_asked_with_its_token_as_sent() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    publish_fixture(&gateway).await;
    let call = |meta: Value| {
        gateway
            .post("/v1/mcp/fx")
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta}}))
            .send()
    };

    for token in [json!(17), json!("progress-test-1")] {
        let response = call(json!({"progressToken": token})).await.unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let messages = events(&response.text().await.unwrap());
        let (progress, rest): (Vec<&Value>, Vec<&Value>) =
            messages.iter().partition(|m| m["method"] == "notifications/progress");
        let values: Vec<f64> = progress
            .iter()
            .map(|m| m["params"]["progress"].as_f64().unwrap())
            .collect();
        assert_eq!(values, [0.0, 50.0, 100.0], "{messages:?}");
        for message in &progress {
            // Echoed exactly: a number stays a number.
            assert_eq!(message["params"]["progressToken"], token);
            assert_eq!(message["params"]["total"], 100.0);
        }
        assert_eq!(rest.len(), 1, "then the result alone: {messages:?}");
        assert_eq!(rest[0]["id"], 4);
        assert_eq!(rest[0]["result"]["isError"], false);
    }

    // Without a token, the reports are dropped and the answer is plain JSON.
    let response = call(json!({})).await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["result"]["content"][0]["text"],
        "Tool with progress executed successfully"
    );
}
