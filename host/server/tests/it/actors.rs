//! Hosted actors against the real gateway: a configured cap on deployments
//! refuses one more with `plan_limit` (moving an existing one still works),
//! and a caller that goes away mid-run cancels it: the next step's model call
//! is never made.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::control_plane::helpers::method;

const SLOW_TWICE: &str = r#"
apiVersion: tollgate.dev/v1
kind: Actor
metadata: {name: slow, namespace: acts}
models:
  slow: {candidates: [mock/slowpoke], max_tokens: 16}
steps:
  - id: first
    llm: {model: slow, prompt: "one"}
  - id: second
    llm: {model: slow, prompt: "two"}
"#;

async fn op(gateway: &Gateway, name: &str, params: Value) -> Value {
    method(gateway, Some(&gateway.api_key), name, params)
        .await
        .unwrap_or_else(|e| panic!("{name} failed: {e:?}"))
}

async fn chat_requests(mock: std::net::SocketAddr) -> u64 {
    let stats: Value = reqwest::get(format!("http://{mock}/__mock/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    stats["chat_requests"].as_u64().unwrap()
}

fn config(mock: std::net::SocketAddr) -> String {
    standard_config(
        mock,
        r#"
[[providers.mock.models]]
id = "slowpoke"
upstream = "slow-1500"
input_price_per_mtok = "0.50"
output_price_per_mtok = "1.50"

[actors]
max_deployments_per_workspace = 1
"#,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_stop_at_the_configured_limit_and_a_disconnect_cancels_the_run() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    op(&gateway, "namespaces.create", json!({"name": "acts"})).await;
    let actor = op(&gateway, "actors.publish", json!({"source": SLOW_TWICE})).await;
    let id = actor["id"].as_str().unwrap();

    op(
        &gateway,
        "deployments.create",
        json!({"namespace": "acts", "name": "one", "actor_id": id}),
    )
    .await;
    let refused = method(
        &gateway,
        Some(&gateway.api_key),
        "deployments.create",
        json!({"namespace": "acts", "name": "two", "actor_id": id}),
    )
    .await
    .expect_err("a second deployment passes the limit of one");
    assert!(format!("{refused:?}").contains("plan_limit"), "{refused:?}");
    // Moving the existing deployment is not a new one.
    op(
        &gateway,
        "deployments.create",
        json!({"namespace": "acts", "name": "one", "actor_id": id}),
    )
    .await;
    let listed = op(&gateway, "deployments.list", json!({})).await;
    assert_eq!(listed["limit"], 1);
    assert_eq!(listed["deployments"].as_array().unwrap().len(), 1);

    // Start a streamed run, read its first event, and hang up while the
    // first (slow) model call is in flight.
    let before = chat_requests(mock).await;
    let mut response = gateway
        .post("/v1/actors/acts/one")
        .json(&json!({"input": {}, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("step.started"), "{first:?}");
    // The first call is sent (and held by the mock for 1.5 s) before we go.
    for _ in 0..100 {
        if chat_requests(mock).await > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(chat_requests(mock).await - before, 1, "the first call was not sent");
    drop(response);
    // Long enough for the first call to end and a second to start, had the
    // run gone on.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(
        chat_requests(mock).await - before,
        1,
        "the run went on after its caller left"
    );
}
