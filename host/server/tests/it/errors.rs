//! Every error case answers with its status and an OpenAI-shaped body, and the
//! gateway keeps serving afterwards.

use crate::common;

use common::{Gateway, assert_error_shape, free_port, standard_config, start_mock};
use serde_json::json;

#[tokio::test]
async fn authentication_errors_are_401() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let url = format!("{}/v1/chat/completions", gateway.url);
    let body = json!({"model": "mock/small", "messages": [{"role": "user", "content": "hi"}]});
    let well_formed_but_unknown = format!("tg_live_{}", "A".repeat(40));
    for auth in [
        None,
        Some("Basic abc"),
        Some("Bearer nope"),
        Some(well_formed_but_unknown.as_str()),
    ] {
        let mut request = gateway.http.post(&url).json(&body);
        if let Some(value) = auth {
            request = request.header("authorization", value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{auth:?}");
        let json: serde_json::Value = response.json().await.unwrap();
        assert_eq!(assert_error_shape(&json)["type"], "authentication_error");
    }
    let models = gateway
        .http
        .get(format!("{}/v1/models", gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 401);
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn invalid_bodies_are_400_and_unknown_models_404() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    for raw in [
        "{not json",
        "[]",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
        "{\"model\":\"mock/small\"}",
    ] {
        let response = gateway
            .post("/v1/chat/completions")
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{raw}");
        let json: serde_json::Value = response.json().await.unwrap();
        assert_eq!(assert_error_shape(&json)["type"], "invalid_request_error", "{raw}");
    }
    let (status, _, body) = gateway
        .chat(json!({"model": "nobody/nothing", "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(status, 404);
    assert_eq!(assert_error_shape(&body)["code"], "model_not_found");
    let (status, _, body) = gateway
        .chat(json!({"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(status, 503, "a built-in provider without a key: {body}");
    assert_eq!(assert_error_shape(&body)["code"], "provider_not_configured");
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[limits]\nmax_body_bytes = 65536\n")).await;
    let huge = "x".repeat(100_000);
    let (status, _, body) = gateway
        .chat(json!({"model": "mock/small", "messages": [{"role": "user", "content": huge}]}))
        .await;
    assert_eq!(status, 413);
    assert_eq!(assert_error_shape(&body)["code"], "request_too_large");
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn upstream_failures_are_502_or_504_never_a_hang() {
    let mock = start_mock(Default::default()).await;
    let dead_port = free_port();
    let extra = format!(
        r#"
[timeouts]
first_byte_ms = 1000
idle_ms = 1000
[breaker]
failure_threshold = 0
[providers.dead]
base_url = "http://127.0.0.1:{dead_port}/v1"
api_key = "sk-x"
models = [{{ id = "m", input_price_per_mtok = "1", output_price_per_mtok = "1" }}]
"#
    );
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let ask = |model: &str, mock_directive: serde_json::Value| json!({"model": model, "messages": [{"role": "user", "content": "x"}], "mock": mock_directive});

    let (status, _, body) = gateway.chat(ask("mock/small", json!({"status": 500}))).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "upstream_error");

    let (status, headers, body) = gateway
        .chat(ask("mock/small", json!({"status": 429, "retry_after": 3})))
        .await;
    assert_eq!(status, 429, "a lone candidate's rate limit is passed on: {body}");
    assert_eq!(headers["retry-after"], "3");
    assert_eq!(assert_error_shape(&body)["code"], "upstream_rate_limited");

    let (status, _, body) = gateway
        .chat(ask(
            "mock/small",
            json!({"status": 400, "error_code": "context_length_exceeded"}),
        ))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "context_length_exceeded");

    let (status, _, body) = gateway.chat(ask("dead/m", json!({}))).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "upstream_unreachable");

    let started = std::time::Instant::now();
    let (status, _, body) = gateway.chat(ask("mock/small", json!({"latency_ms": 5000}))).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "upstream_timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(4));

    // A stream cut mid-way ends with an error frame, then [DONE].
    let (status, frames) = gateway
        .chat_stream(
            json!({"model": "mock/small", "stream": true, "messages": [{"role": "user", "content": "a b c d e f"}],
            "mock": {"cut_after": 3}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"));
    let last: serde_json::Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "error", "{last}");
    assert!(last["error"]["message"].is_string());
    assert!(last["usage"]["cost"].is_number());

    let unknown_route = gateway.get("/v1/nothing-here").send().await.unwrap();
    assert_eq!(unknown_route.status(), 404);
    let json: serde_json::Value = unknown_route.json().await.unwrap();
    assert_error_shape(&json);

    gateway.assert_still_serving().await;
}
