//! Circuit breakers per (provider, model): one model's failures and rate
//! limits never take its healthy siblings offline, and a half-open trial that
//! is cancelled gives its place back.

use crate::common;

use std::time::Duration;

use common::{Gateway, mock_chat_requests, start_mock};
use futures_util::StreamExt;
use serde_json::{Value, json};

fn config(mock: std::net::SocketAddr) -> String {
    format!(
        r#"
[breaker]
failure_threshold = 2
cooldown_ms = 300
[providers.acme]
base_url = "http://{mock}/v1"
api_key = "sk-acme"
models = [
  {{ id = "echo", upstream = "small", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "flaky", upstream = "small", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "broken", upstream = "fail-500", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "cutter", upstream = "cut-3", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
]
"#
    )
}

fn ask(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn a_healthy_model_keeps_serving_while_its_siblings_fail() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    // 10% each to three faulty models of the same provider, the rest healthy.
    let plan: Vec<(&str, bool)> = (0..400)
        .map(|i| match i % 10 {
            0 => ("acme/limited", false),
            1 => ("acme/broken", false),
            2 => ("acme/cutter", true),
            _ => ("acme/echo", i % 2 == 0),
        })
        .collect();
    let results: Vec<(String, u16, String)> = futures_util::stream::iter(plan)
        .map(|(model, stream)| {
            let gateway = &gateway;
            async move {
                let mut body = ask(model);
                body["stream"] = json!(stream);
                let response = gateway.post("/v1/chat/completions").json(&body).send().await.unwrap();
                let status = response.status().as_u16();
                let text = response.text().await.unwrap_or_default();
                (model.to_string(), status, text)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut faulty_failed = 0;
    for (model, status, text) in &results {
        if model == "acme/echo" {
            assert_eq!(*status, 200, "a healthy model failed: {text}");
            assert!(!text.contains("\"error\""), "a healthy model's stream failed: {text}");
        } else if *status != 200 || text.contains("\"finish_reason\":\"error\"") {
            faulty_failed += 1;
        }
    }
    assert_eq!(faulty_failed, 120, "every faulty request failed, visibly");
    let listed = gateway.model("acme/echo").await;
    assert_eq!(listed["service"]["available"], true, "{listed}");
    assert_eq!(gateway.model("acme/broken").await["service"]["available"], false);
}

#[tokio::test]
async fn a_cancelled_half_open_trial_does_not_wedge_the_breaker() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let failing =
        json!({"model": "acme/flaky", "messages": [{"role": "user", "content": "x"}], "mock": {"status": 500}});
    for _ in 0..2 {
        let (status, _, body) = gateway.chat(failing.clone()).await;
        assert_eq!(status, 502, "{body}");
    }
    // Open: with a fallback, flaky is skipped without a call.
    let mut with_fallback = ask("acme/flaky");
    with_fallback["models"] = json!(["acme/echo"]);
    let (status, _, body) = gateway.chat(with_fallback.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["service"]["attempts"][0]["outcome"], "provider_circuit_open");

    tokio::time::sleep(Duration::from_millis(400)).await;
    // The half-open trial: slow, and abandoned by its caller mid-call.
    let calls = mock_chat_requests(mock).await;
    let mut slow = ask("acme/flaky");
    slow["mock"] = json!({"latency_ms": 3000});
    let abandoned = gateway
        .post("/v1/chat/completions")
        .json(&slow)
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(abandoned.is_err(), "the trial was cancelled by its caller");
    assert_eq!(
        mock_chat_requests(mock).await,
        calls + 1,
        "the trial reached the upstream"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The trial's place was given back: the next request is the new trial,
    // flaky answers it, and the breaker closes.
    let (status, _, body) = gateway.chat(with_fallback.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["service"]["attempts"][0]["outcome"], "success", "{body}");
    assert_eq!(body["service"]["model"], "acme/flaky", "{body}");
    let listed = gateway.model("acme/flaky").await;
    assert_eq!(listed["service"]["available"], true, "{listed}");
}
