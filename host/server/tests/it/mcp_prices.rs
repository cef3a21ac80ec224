//! The operator's price per tool call (`[tool_prices]`), against the real
//! binary: a priced call of the calculator posts exactly its price to the
//! caller's wallet, as the fee of the call's own request-log row; an unpriced
//! package stays free; a wallet that cannot pay is refused before the tool
//! runs (the sampling tool's model is never asked), with the documented
//! `insufficient_balance` error in the tool result, and nothing is posted.

use serde_json::{Value, json};

use crate::common::{Gateway, mock_chat_requests, nanos, standard_config, start_mock};
use crate::components::{install, publish};
use crate::control_plane::helpers::method;
use crate::mcp_catalog::rpc_as;

/// 0.000123 USD a call of the calculator, 0.000777 of the sampling tool.
const PRICES: &str =
    "[tool_prices]\npackages = { \"tollgate/calculator\" = \"0.000123\", \"px/sampler\" = \"0.000777\" }\n";

fn posted(gateway: &Gateway) -> i64 {
    nanos(gateway.wallet()["posted_usd"].as_str().unwrap())
}

async fn call(gateway: &Gateway, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    rpc_as(gateway, &gateway.api_key, "/v1/mcp", "tools/call", params).await["result"].clone()
}

/// The request-log row of the one `tool_call` named `tool` made after `seen`
/// such rows (a free call's row is committed in the background).
async fn tool_row(gateway: &Gateway, tool: &str, seen: usize) -> Value {
    for _ in 0..100 {
        let usage = method(gateway, Some(&gateway.api_key), "usage.list", json!({}))
            .await
            .unwrap();
        let rows: Vec<Value> = usage["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row["kind"] == "tool_call" && row["model"] == tool)
            .cloned()
            .collect();
        if rows.len() > seen {
            let id = rows[0]["request_id"].as_str().unwrap().to_string();
            return serde_json::from_str(&gateway.admin(&["request", &id])).unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no row for {tool}");
}

async fn publish_sampler(gateway: &Gateway) {
    let content = std::fs::read(tollgate_plugin_host::SAMPLING_TOOL_TEST_COMPONENT).unwrap();
    method(
        gateway,
        Some(&gateway.api_key),
        "namespaces.create",
        json!({"name": "px"}),
    )
    .await
    .unwrap();
    let manifest = json!({
        "schema_version": 1, "kind": "tool-server", "name": "px/sampler", "version": "1.0.0",
        "license": "Apache-2.0",
        "content": {"digest": tollgate_registry::Digest::of(&content).to_string(), "size": content.len(), "media_type": "application/wasm"},
        "metadata": {"world": "tollgate:tool/tool-server@0.4.0", "capabilities": ["models"]},
    });
    publish(gateway, manifest, &content).await;
    install(gateway, json!({"package": "px/sampler", "name": "sampler"})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priced_tool_call_posts_its_exact_price_as_a_fee_line_of_its_own() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, PRICES)).await;
    install(&gateway, json!({"package": "tollgate/calculator", "name": "calc"})).await;
    install(&gateway, json!({"package": "tollgate/http-fetch", "name": "fetch"})).await;

    let before = posted(&gateway);
    let result = call(&gateway, "calc__evaluate", json!({"expression": "2*(3+4)"})).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(before - posted(&gateway), 123_000, "the wallet pays the price, exactly");
    let row = tool_row(&gateway, "calc__evaluate", 0).await;
    assert_eq!(row["cost_usd"], "0.000123000", "{row}");
    assert_eq!(row["cost_breakdown"]["fee_usd"], "0.000123000", "{row}");

    // A tool error is still a call served, and paid.
    let before = posted(&gateway);
    let result = call(&gateway, "calc__evaluate", json!({"expression": "1/0"})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(before - posted(&gateway), 123_000);

    // A package the operator did not price stays free.
    let before = posted(&gateway);
    call(&gateway, "fetch__fetch", json!({"url": "https://example.invalid/"})).await;
    assert_eq!(posted(&gateway), before);
    gateway.assert_still_serving().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wallet_that_cannot_pay_a_tools_price_is_refused_before_the_tool_runs() {
    let mock = start_mock(Default::default()).await;
    // 0.0005 USD: less than the sampler's 0.000777.
    let gateway = Gateway::start_with(&standard_config(mock, PRICES), "0.0005").await;
    publish_sampler(&gateway).await;
    let upstream = mock_chat_requests(mock).await;
    let before = posted(&gateway);

    let result = call(&gateway, "sampler__ask", json!({"model": "mock/small", "prompt": "hi"})).await;
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("(insufficient_balance)"), "{text}");
    assert!(text.contains("0.000777 USD"), "{text}");
    assert_eq!(mock_chat_requests(mock).await, upstream, "the tool never ran");
    assert_eq!(posted(&gateway), before, "nothing was posted");
    let row = tool_row(&gateway, "sampler__ask", 0).await;
    assert_eq!(row["status"], 402, "{row}");
    assert_eq!(row["cost_usd"], "0.000000000", "{row}");
    // Still serving: a chat this wallet cannot pay either is refused the same way.
    let (status, _, body) = gateway
        .chat(json!({"model": "mock/small", "messages": [{"role": "user", "content": "still there?"}]}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (402, Some("insufficient_balance")),
        "{body}"
    );
}
