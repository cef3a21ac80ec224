//! The response cache, against the real binary: the same request twice makes
//! one upstream call, and the second answer (whole, or replayed as a stream)
//! says `service.cache.hit` and costs the operator's cache price, logged as a
//! `cache_hit`; `Cache-Control: no-store` skips it; two workspaces never share
//! an entry; a semantically close request hits above the threshold and
//! misses below it, with its embedding billed to the caller.

use serde_json::{Value, json};

use crate::common::{Gateway, admin, mock_chat_requests, mock_requests, nanos, standard_config, start_mock};
use crate::control_plane::helpers::method;

fn ask(text: &str) -> Value {
    json!({"model": "mock/small", "messages": [{"role": "user", "content": text}]})
}

const CACHE: &str = r#"
[cache]
enabled = true
hit_price_usd = "0.0001"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_request_twice_makes_one_upstream_call() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, CACHE)).await;
    let before = mock_chat_requests(mock).await;
    let (status, _, first) = gateway.chat(ask("Tell me about caches")).await;
    assert_eq!(status, 200, "{first}");
    assert!(first["service"]["cache"].is_null(), "{first}");
    // Key order and spacing do not matter: the key is the canonical request.
    let reordered: Value =
        serde_json::from_str(r#"{"messages":[{"content":"Tell me about caches","role":"user"}],"model":"mock/small"}"#)
            .unwrap();
    let (status, _, second) = gateway.chat(reordered).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(mock_chat_requests(mock).await, before + 1, "one upstream call");
    assert_eq!(second["service"]["cache"]["hit"], true, "{second}");
    assert_eq!(second["service"]["cache"]["kind"], "exact");
    assert_eq!(second["choices"], first["choices"]);
    assert_eq!(second["usage"]["cost"], json!(0.0001), "{second}");
    assert_eq!(second["usage"]["prompt_tokens"], 0);
    let hit_id = second["service"]["request_id"].as_str().unwrap();
    assert_ne!(hit_id, first["service"]["request_id"].as_str().unwrap());

    // Logged (and so metered) as a cache hit, at the cache price.
    let mut logged = Value::Null;
    for _ in 0..50 {
        let usage = method(&gateway, Some(&gateway.api_key), "usage.list", json!({}))
            .await
            .unwrap();
        if let Some(entry) = usage["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["request_id"] == hit_id)
        {
            logged = entry.clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(logged["kind"], "cache_hit", "{logged}");
    assert_eq!(nanos(logged["cost_usd"].as_str().unwrap()), nanos("0.0001"));

    // `no-store`: neither served nor kept.
    let response = gateway
        .post("/v1/chat/completions")
        .header("cache-control", "no-store")
        .json(&ask("Tell me about caches"))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert!(body["service"]["cache"].is_null(), "{body}");
    assert_eq!(mock_chat_requests(mock).await, before + 2);

    // Another workspace asking the same never gets this one's entry.
    let created = admin(
        &gateway.config_path,
        &["create-account", "--name", "other", "--credit-usd", "5", "--json"],
    );
    let other: Value = serde_json::from_str(&created).unwrap();
    let response = gateway
        .http
        .post(format!("{}/v1/chat/completions", gateway.url))
        .bearer_auth(other["api_key"].as_str().unwrap())
        .json(&ask("Tell me about caches"))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert!(body["service"]["cache"].is_null(), "{body}");
    assert_eq!(mock_chat_requests(mock).await, before + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_kept_whole_and_replayed_as_a_stream() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, CACHE)).await;
    let mut request = ask("Stream me something");
    request["stream"] = json!(true);
    let before = mock_chat_requests(mock).await;
    let (status, first) = gateway.chat_stream(request.clone()).await;
    assert_eq!(status, 200);
    let (status, second) = gateway.chat_stream(request).await;
    assert_eq!(status, 200);
    assert_eq!(mock_chat_requests(mock).await, before + 1);
    let text = |events: &[String]| -> String {
        events
            .iter()
            .filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(text(&first), text(&second));
    assert_eq!(second.last().unwrap(), "[DONE]");
    let closing: Value = serde_json::from_str(&second[second.len() - 2]).unwrap();
    assert_eq!(closing["service"]["cache"]["hit"], true, "{closing}");
    assert_eq!(closing["usage"]["cost"], json!(0.0001));
}

/// Chat calls the mock received (its embeddings calls are not counted).
async fn chat_calls(mock: std::net::SocketAddr) -> usize {
    mock_requests(mock)
        .await
        .iter()
        .filter(|request| {
            request["path"]
                .as_str()
                .is_some_and(|path| path.ends_with("/chat/completions"))
        })
        .count()
}

fn semantic_config(threshold: &str) -> String {
    format!(
        r#"
[[providers.mock.models]]
id = "embed"
operations = ["embeddings"]
input_price_per_mtok = "0.02"
output_price_per_mtok = "0"

[cache]
enabled = true

[cache.semantic]
model = "mock/embed"
threshold = {threshold}
dimensions = 256
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_request_hits_above_the_threshold_and_misses_below_it() {
    let mock = start_mock(Default::default()).await;
    let lenient = Gateway::start(&standard_config(mock, &semantic_config("0.8"))).await;
    let before = chat_calls(mock).await;
    let (status, _, first) = lenient.chat(ask("What is the capital of France?")).await;
    assert_eq!(status, 200, "{first}");
    let (status, _, close) = lenient.chat(ask("what is the capital of france please")).await;
    assert_eq!(status, 200, "{close}");
    assert_eq!(close["service"]["cache"]["kind"], "semantic", "{close}");
    let similarity = close["service"]["cache"]["similarity"].as_f64().unwrap();
    assert!((0.8..1.0).contains(&similarity), "{similarity}");
    assert_eq!(close["choices"], first["choices"]);
    let (_, _, unrelated) = lenient.chat(ask("How do I bake sourdough bread?")).await;
    assert!(unrelated["service"]["cache"].is_null(), "{unrelated}");
    assert_eq!(chat_calls(mock).await, before + 2);

    // The embeddings are billed to the caller, inside the request they served.
    let usage = method(&lenient, Some(&lenient.api_key), "usage.list", json!({}))
        .await
        .unwrap();
    let embeddings: Vec<&Value> = usage["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "embeddings")
        .collect();
    assert!(!embeddings.is_empty(), "{usage}");
    assert!(embeddings.iter().all(|e| e["parent_request_id"].is_string()), "{usage}");

    // A stricter threshold than the pair's similarity: the same pair misses.
    let strict = Gateway::start(&standard_config(mock, &semantic_config("0.99"))).await;
    let before = chat_calls(mock).await;
    strict.chat(ask("What is the capital of France?")).await;
    let (_, _, close) = strict.chat(ask("what is the capital of france please")).await;
    assert!(close["service"]["cache"].is_null(), "{close}");
    assert_eq!(chat_calls(mock).await, before + 2);
}
