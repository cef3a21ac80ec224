//! Ordered fallback before the answer starts: scripted upstream faults make the
//! primary fail, and the next candidate answers inside the same response.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Gateway, assert_error_shape, free_port, mock_chat_requests, nanos, start_mock};
use serde_json::{Value, json};

/// Providers on the mock whose models fail in scripted ways (`fail-<status>`,
/// `slow-<ms>` are the mock's model-name faults), a dead endpoint, and a backup.
fn config(mock: SocketAddr) -> String {
    let dead = free_port();
    format!(
        r#"
[timeouts]
first_byte_ms = 1000
[providers.primary]
base_url = "http://{mock}/v1"
api_key = "sk-primary"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "broken", upstream = "fail-500", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "picky", upstream = "fail-400", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "slow", upstream = "slow-5000", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "cutter", upstream = "cut-3", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "limiter", upstream = "ratelimit-3", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "fine", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
]
[providers.dead]
base_url = "http://127.0.0.1:{dead}/v1"
api_key = "sk-dead"
models = [{{ id = "gone", input_price_per_mtok = "1", output_price_per_mtok = "2" }}]
[providers.backup]
base_url = "http://{mock}/v1"
api_key = "sk-backup"
models = [{{ id = "small", input_price_per_mtok = "0.50", output_price_per_mtok = "1.50" }}]
"#
    )
}

fn ask(model: &str, fallbacks: &[&str]) -> Value {
    json!({"model": model, "models": fallbacks, "messages": [{"role": "user", "content": "fall back"}]})
}

#[tokio::test]
async fn retryable_failures_fall_over_to_the_next_candidate() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    for (primary, status, outcome) in [
        ("primary/limited", Some(429), "upstream_rate_limited"),
        ("primary/broken", Some(500), "upstream_error"),
        ("dead/gone", None, "upstream_unreachable"),
    ] {
        let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
        let (code, _, body) = gateway.chat(ask(primary, &["backup/small"])).await;
        assert_eq!(code, 200, "{primary}: {body}");
        assert_eq!(body["provider"], "backup", "{primary}");
        assert_eq!(body["choices"][0]["message"]["content"], "You said: fall back");
        let attempts = body["service"]["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{body}");
        assert_eq!(
            attempts[0]["provider"],
            if primary.starts_with("dead") { "dead" } else { "primary" }
        );
        assert_eq!(attempts[0]["outcome"], outcome, "{primary}");
        assert_eq!(attempts[0]["status"], json!(status));
        assert_eq!(attempts[0]["cost_usd"], "0.000000000");
        assert_eq!(attempts[1]["outcome"], "success");
        // No double billing: the attempts' costs add up to usage.cost and to the ledger post.
        let cost = nanos(body["service"]["cost_usd"].as_str().unwrap());
        let summed: i64 = attempts.iter().map(|a| nanos(a["cost_usd"].as_str().unwrap())).sum();
        assert_eq!(summed, cost);
        assert_eq!((body["usage"]["cost"].as_f64().unwrap() * 1e9).round() as i64, cost);
        let after = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
        assert_eq!(before - after, cost, "{primary}");
    }
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

#[tokio::test]
async fn a_timeout_before_the_first_byte_falls_over_within_the_timeout() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let started = Instant::now();
    let (code, _, body) = gateway.chat(ask("primary/slow", &["backup/small"])).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["provider"], "backup");
    assert_eq!(body["service"]["attempts"][0]["outcome"], "upstream_timeout");
    assert!(
        started.elapsed() < Duration::from_millis(3000),
        "took {:?}",
        started.elapsed()
    );

    // The same through a stream: the switch happens before anything is sent.
    let mut request = ask("primary/limited", &["backup/small"]);
    request["stream"] = json!(true);
    let (code, frames) = gateway.chat_stream(request).await;
    assert_eq!(code, 200);
    assert_eq!(frames.iter().filter(|f| *f == "[DONE]").count(), 1);
    let last: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(last["provider"], "backup");
    assert_eq!(last["service"]["attempts"].as_array().unwrap().len(), 2, "{last}");
}

#[tokio::test]
async fn a_bad_request_does_not_fail_over() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let calls = mock_chat_requests(mock).await;
    let (code, _, body) = gateway.chat(ask("primary/picky", &["backup/small"])).await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "upstream_rejected_request");
    assert_eq!(body["service"]["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(mock_chat_requests(mock).await, calls + 1, "the backup was not called");
    // Streaming too: the caller's error keeps its status.
    let mut request = ask("primary/picky", &["backup/small"]);
    request["stream"] = json!(true);
    let response = gateway
        .post("/v1/chat/completions")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
}

#[tokio::test]
async fn when_every_candidate_fails_the_answer_is_502_with_the_trail_and_nothing_is_billed() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let (code, _, body) = gateway
        .chat(ask("primary/limited", &["primary/broken", "dead/gone"]))
        .await;
    assert_eq!(code, 502, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "all_candidates_failed");
    let outcomes: Vec<&str> = body["service"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["upstream_rate_limited", "upstream_error", "upstream_unreachable"]
    );
    let wallet = gateway.settled_wallet().await;
    assert_eq!(
        wallet["posted_usd"], "100.000000000",
        "failed attempts consumed no tokens: {wallet}"
    );
    assert_eq!(wallet["pending_usd"], "0.000000000");
}

#[tokio::test]
async fn invalid_candidate_lists_are_refused_before_anything_is_reserved() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let calls = mock_chat_requests(mock).await;
    let (code, _, body) = gateway.chat(ask("backup/small", &["nobody/nothing"])).await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(assert_error_shape(&body)["param"], "models");
    let (code, _, body) = gateway
        .chat(
            json!({"model": "backup/small", "models": "backup/small", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(code, 400, "{body}");
    let eight = vec!["backup/small"; 8];
    let (code, _, body) = gateway.chat(ask("backup/small", &eight)).await;
    assert_eq!(code, 400, "{body}");
    // `fallbacks` is accepted as an alias.
    let (code, _, body) = gateway
        .chat(json!({"model": "primary/broken", "fallbacks": ["backup/small"], "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        mock_chat_requests(mock).await,
        calls + 2,
        "only the last request reached the upstream"
    );
}

/// The text, the `[DONE]` count and the final chunk of a streamed answer.
async fn stream_answer(gateway: &Gateway, request: Value) -> (String, usize, Value) {
    let (code, frames) = gateway.chat_stream(request).await;
    assert_eq!(code, 200);
    let done = frames.iter().filter(|f| *f == "[DONE]").count();
    let chunks: Vec<Value> = frames
        .iter()
        .filter(|f| *f != "[DONE]")
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let text = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    (text, done, chunks.last().unwrap().clone())
}

#[tokio::test]
async fn a_stream_cut_mid_answer_continues_on_the_next_candidate_as_one_answer() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    for (primary, outcome) in [
        ("primary/cutter", "upstream_unreachable"),
        ("primary/limiter", "upstream_rate_limited"),
    ] {
        let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
        let request = json!({"model": primary, "models": ["backup/small"], "stream": true,
            "messages": [{"role": "user", "content": "one two three four five six"}]});
        let (text, done, last) = stream_answer(&gateway, request).await;
        assert_eq!(
            text, "You said: one two three four five six",
            "{primary}: partial + continuation read as one answer"
        );
        assert_eq!(done, 1);
        assert_eq!(last["provider"], "backup");
        let attempts = last["service"]["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{last}");
        assert_eq!(attempts[0]["outcome"], outcome, "{primary}");
        assert_eq!(attempts[1]["outcome"], "success");
        // Both attempts consumed tokens and are billed, once each.
        let costs: Vec<i64> = attempts
            .iter()
            .map(|a| nanos(a["cost_usd"].as_str().unwrap()))
            .collect();
        assert!(costs.iter().all(|c| *c > 0), "{attempts:?}");
        let cost = nanos(last["service"]["cost_usd"].as_str().unwrap());
        assert_eq!(costs.iter().sum::<i64>(), cost);
        assert_eq!((last["usage"]["cost"].as_f64().unwrap() * 1e9).round() as i64, cost);
        assert_eq!(
            before - nanos(gateway.wallet()["posted_usd"].as_str().unwrap()),
            cost,
            "{primary}"
        );
    }
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

#[tokio::test]
async fn continuation_can_be_turned_off_and_never_resumes_a_tool_call() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let request = json!({"model": "primary/cutter", "models": ["backup/small"], "stream": true, "continuation": false,
        "messages": [{"role": "user", "content": "one two three four five six"}]});
    let (text, done, last) = stream_answer(&gateway, request).await;
    assert_eq!(text, "You said: one");
    assert_eq!(done, 1);
    assert_eq!(last["choices"][0]["finish_reason"], "error", "{last}");
    assert_eq!(last["service"]["attempts"].as_array().unwrap().len(), 1);

    let calls = mock_chat_requests(mock).await;
    let request = json!({"model": "primary/cutter", "models": ["backup/small"], "stream": true,
        "messages": [{"role": "user", "content": "look it up"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query", "limit"]}}}]});
    let (code, frames) = gateway.chat_stream(request).await;
    assert_eq!(code, 200);
    let last: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(
        last["choices"][0]["finish_reason"], "error",
        "a half-sent tool call ends the stream: {last}"
    );
    assert_eq!(last["service"]["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(
        mock_chat_requests(mock).await,
        calls + 1,
        "no second candidate was asked to resume a tool call"
    );
}

#[tokio::test]
async fn the_circuit_breaker_skips_a_failing_provider_then_retries_after_the_cooldown() {
    let mock = start_mock(Default::default()).await;
    let extra = "[breaker]\nfailure_threshold = 3\ncooldown_ms = 1000\n";
    let gateway = Gateway::start(&format!("{}{extra}", config(mock))).await;
    for _ in 0..3 {
        let (code, _, body) = gateway.chat(ask("primary/broken", &[])).await;
        assert_eq!(code, 502, "{body}");
    }
    let calls = mock_chat_requests(mock).await;
    let (code, _, body) = gateway.chat(ask("primary/broken", &["backup/small"])).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["service"]["attempts"][0]["outcome"], "provider_circuit_open",
        "{body}"
    );
    assert_eq!(
        mock_chat_requests(mock).await,
        calls + 1,
        "the open provider was skipped without a call"
    );
    let listed: Value = gateway.model("primary/broken").await;
    assert_eq!(listed["service"]["available"], false, "{listed}");
    // Alone, an open candidate is still called: every candidate is open, so the
    // one open longest gets the request instead of a refusal without a call.
    let calls = mock_chat_requests(mock).await;
    let (code, _, body) = gateway.chat(ask("primary/broken", &[])).await;
    assert_eq!(code, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_error");
    assert_eq!(mock_chat_requests(mock).await, calls + 1);

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let calls = mock_chat_requests(mock).await;
    let (code, _, _) = gateway.chat(ask("primary/broken", &[])).await;
    assert_eq!(code, 502, "after the cooldown one trial request reaches the provider");
    assert_eq!(mock_chat_requests(mock).await, calls + 1);
}

#[tokio::test]
async fn retry_after_from_a_429_holds_that_model_back_and_is_passed_on() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let mut request = ask("backup/small", &[]);
    request["mock"] = json!({"status": 429, "retry_after": 30});
    let (code, headers, body) = gateway.chat(request).await;
    assert_eq!(code, 429, "a lone candidate's 429 reaches the caller: {body}");
    assert_eq!(headers["retry-after"], "30");
    assert_eq!(body["error"]["code"], "upstream_rate_limited");
    let calls = mock_chat_requests(mock).await;
    let (code, headers, body) = gateway.chat(ask("backup/small", &[])).await;
    assert_eq!(code, 429, "{body}");
    let wait: u32 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((28..=30).contains(&wait), "the time left to wait: {wait}");
    assert_eq!(mock_chat_requests(mock).await, calls, "held back without a call");
    let (code, _, body) = gateway.chat(ask("backup/small", &["primary/fine"])).await;
    assert_eq!(code, 200, "the next candidate answers: {body}");
    assert_eq!(body["service"]["attempts"][0]["outcome"], "upstream_rate_limited");
}
