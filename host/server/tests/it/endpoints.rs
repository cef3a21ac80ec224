//! The model endpoints besides chat (docs/endpoints.md) against the real
//! gateway and the mock provider: embeddings and moderations carry the
//! provider, the exact cost and the request id, move the wallet by exactly
//! that cost, fall over like chat, and are refused (402, no upstream call)
//! when the wallet cannot hold their worst case.

use std::net::SocketAddr;

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{Gateway, assert_error_shape, mock_chat_requests, nanos, standard_config, start_mock};

/// The standard config plus provider `emb`, whose models serve embeddings
/// (one fails with 429, one with 500: the mock's model-name faults) or
/// moderations, at 20 USD per million input tokens so costs are visible.
fn config(mock: SocketAddr) -> String {
    standard_config(
        mock,
        &format!(
            r#"
[providers.emb]
adapter = "openai-compatible"
base_url = "http://{mock}/v1"
api_key = "sk-test-upstream"
models = [
  {{ id = "small-embed", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "limited-embed", upstream = "fail-429", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "broken-embed", upstream = "fail-500", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "moderate", operations = ["moderation"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
]
"#
        ),
    )
}

async fn post(gateway: &Gateway, path: &str, body: Value) -> (u16, Value) {
    let response = gateway.post(path).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text}"));
    (status, json)
}

fn cost(body: &Value) -> i64 {
    nanos(body["service"]["cost_usd"].as_str().unwrap())
}

#[tokio::test]
async fn embeddings_are_billed_exactly_and_fall_over_like_chat() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;

    let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    let (status, body) = post(
        &gateway,
        "/v1/embeddings",
        json!({"model": "emb/small-embed", "input": ["hello world", "three words here"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "list");
    assert_eq!(body["provider"], "emb");
    assert_eq!(body["model"], "emb/small-embed");
    assert!(body["service"]["request_id"].as_str().unwrap().starts_with("req_"));
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[1]["index"], 1);
    assert_eq!(data[0]["embedding"].as_array().unwrap().len(), 8);
    // 5 words are 5 prompt tokens at 20 USD per million: 100,000 nano-USD.
    assert_eq!(body["usage"]["prompt_tokens"], 5);
    assert_eq!(body["usage"]["total_tokens"], 5);
    assert_eq!(cost(&body), 100_000);
    assert_eq!((body["usage"]["cost"].as_f64().unwrap() * 1e9).round() as i64, 100_000);
    let after = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    assert_eq!(before - after, 100_000, "the wallet moves by exactly the cost shown");

    // Base64: the same vector as little-endian f32s.
    let (status, encoded) = post(
        &gateway,
        "/v1/embeddings",
        json!({"model": "emb/small-embed", "input": "hello world", "encoding_format": "base64"}),
    )
    .await;
    assert_eq!(status, 200, "{encoded}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let floats: Vec<f64> = bytes
        .chunks(4)
        .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
        .collect();
    let plain: Vec<f64> = data[0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(floats.len(), plain.len());
    assert!(floats.iter().zip(&plain).all(|(a, b)| (a - b).abs() < 1e-6));

    // 429 and 500 from the first candidate: the second answers, billed once.
    for (primary, outcome) in [
        ("emb/limited-embed", "upstream_rate_limited"),
        ("emb/broken-embed", "upstream_error"),
    ] {
        let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
        let (status, body) = post(
            &gateway,
            "/v1/embeddings",
            json!({"model": primary, "models": ["emb/small-embed"], "input": "fall back"}),
        )
        .await;
        assert_eq!(status, 200, "{primary}: {body}");
        let attempts = body["service"]["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{body}");
        assert_eq!(attempts[0]["outcome"], outcome);
        assert_eq!(attempts[1]["outcome"], "success");
        assert_eq!(cost(&body), 40_000, "2 tokens at 20 USD per million");
        let after = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
        assert_eq!(before - after, 40_000, "{primary}");
    }
    assert_eq!(gateway.wallet()["pending_usd"], "0.000000000");

    // A model for another operation is refused before any upstream call.
    let upstream = mock_chat_requests(mock).await;
    let (status, body) = post(&gateway, "/v1/embeddings", json!({"model": "mock/small", "input": "x"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "operation_not_supported");
    let (status, _, body) = gateway
        .chat(json!({"model": "emb/small-embed", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "operation_not_supported");
    let (status, body) = post(&gateway, "/v1/embeddings", json!({"model": "emb/small-embed"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["param"], "input");
    let (status, body) = post(&gateway, "/v1/embeddings", json!(["not", "an", "object"])).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(mock_chat_requests(mock).await, upstream, "nothing went upstream");

    // The catalog says what each model serves.
    let listed = gateway.model("emb/small-embed").await;
    assert_eq!(listed["service"]["operations"], json!(["embeddings"]), "{listed}");
    assert_eq!(listed["service"]["available"], true, "{listed}");
    assert_eq!(
        gateway.model("mock/small").await["service"]["operations"],
        json!(["chat"])
    );
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn moderations_carry_the_provider_and_exact_cost() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    let (status, body) = post(
        &gateway,
        "/v1/moderations",
        json!({"model": "emb/moderate", "input": ["a calm sentence", "flagme please"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["provider"], "emb");
    let results = body["results"].as_array().unwrap();
    assert_eq!(
        (results[0]["flagged"].as_bool(), results[1]["flagged"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(body["usage"]["prompt_tokens"], 5);
    assert_eq!(cost(&body), 100_000);
    let after = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    assert_eq!(before - after, 100_000);
}

#[tokio::test]
async fn a_wallet_too_small_for_the_worst_case_is_refused_before_any_upstream_call() {
    let mock = start_mock(Default::default()).await;
    // The worst case counts every body byte as a token: about 60 bytes at
    // 20 USD per million is 1,200 nano-USD, more than the wallet's 1,000.
    let gateway = Gateway::start_with(&config(mock), "0.000001").await;
    let upstream = mock_chat_requests(mock).await;
    for (path, body) in [
        (
            "/v1/embeddings",
            json!({"model": "emb/small-embed", "input": "hello world"}),
        ),
        (
            "/v1/moderations",
            json!({"model": "emb/moderate", "input": "hello world"}),
        ),
    ] {
        let (status, body) = post(&gateway, path, body).await;
        assert_eq!(status, 402, "{path}: {body}");
        assert_eq!(assert_error_shape(&body)["code"], "insufficient_balance", "{path}");
    }
    assert_eq!(mock_chat_requests(mock).await, upstream, "nothing went upstream");
    assert_eq!(gateway.wallet()["pending_usd"], "0.000000000");
}
