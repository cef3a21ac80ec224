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
    let (status, _, body) = gateway
        .chat(json!({"model": "aphrodite/default", "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(
        status, 503,
        "a local server nobody enabled, not a connection refused: {body}"
    );
    let error = assert_error_shape(&body);
    assert_eq!(error["code"], "provider_not_configured");
    assert!(
        error["message"].as_str().unwrap().contains("add [providers.aphrodite]"),
        "{body}"
    );
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[server]\nmax_body_bytes = 65536\n")).await;
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

/// Every authenticated request leaves a trace: a refused one (bad body,
/// unknown model, too large) has its request-log row, shown by `tollgate
/// admin request`, and makes no usage event (nothing was metered).
#[tokio::test(flavor = "multi_thread")]
async fn refused_requests_leave_a_trace_and_no_usage_event() {
    let mock = start_mock(Default::default()).await;
    let config = "[limits]\nmax_body_bytes = 65536\n[metering]\nlinger_ms = 5\n";
    let gateway = Gateway::start(&standard_config(mock, config)).await;
    let huge = "x".repeat(100_000);
    let cases = [
        (
            "/v1/chat/completions",
            "{\"model\":\"mock/small\"}".to_string(),
            400,
            "invalid_request",
            "",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "nobody/nothing", "messages": [{"role": "user", "content": "x"}]}).to_string(),
            404,
            "model_not_found",
            "nobody/nothing",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "mock/small", "messages": [{"role": "user", "content": huge}]}).to_string(),
            413,
            "request_too_large",
            "",
        ),
        (
            "/v1/messages",
            "{\"model\":\"mock/small\"}".to_string(),
            400,
            "invalid_request",
            "mock/small",
        ),
    ];
    let mut refused = Vec::new();
    for (path, body, status, code, model) in cases {
        let response = gateway
            .post(path)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{path} {code}");
        let id = response.headers()["x-request-id"].to_str().unwrap().to_string();
        let row: serde_json::Value = serde_json::from_str(&gateway.admin(&["request", &id])).unwrap();
        assert_eq!(row["status"], status, "{row}");
        assert!(row["outcome"].as_str().unwrap().starts_with(code), "{code}: {row}");
        assert_eq!(row["model"], model, "{row}");
        assert_eq!(row["cost_usd"], "0.000000000", "{row}");
        assert_eq!(row["workspace_id"], gateway.workspace_id.as_str(), "{row}");
        refused.push(id);
    }
    // The feed is in commit order: once a later request's event is out, the
    // refused rows were passed over, not delayed.
    let (status, headers, _) = gateway
        .chat(json!({"model": "mock/small", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 200);
    let answered = headers["x-request-id"].to_str().unwrap().to_string();
    let events = gateway.dir.path().join("data/events/usage.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut text = String::new();
    while std::time::Instant::now() < deadline && !text.contains(&answered) {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        text = std::fs::read_to_string(&events).unwrap_or_default();
    }
    assert!(text.contains(&answered), "the answered request's event arrived");
    for id in &refused {
        assert!(!text.contains(id.as_str()), "no usage event for refused {id}");
    }
    gateway.assert_still_serving().await;
}

/// Requests refused at authentication leave a row too: 429 over the key's rate
/// in the key's workspace, 401 with no workspace. The rows are budgeted per
/// caller (60 a minute), so a flood of bad keys is answered but not all logged.
#[tokio::test]
async fn refusals_at_authentication_leave_a_budgeted_trace() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[auth]\nkey_requests_per_minute = 1\n")).await;
    let body = json!({"model": "mock/small", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(gateway.chat(body.clone()).await.0, 200);
    let (status, headers, _) = gateway.chat(body.clone()).await;
    assert_eq!(status, 429);
    let limited = headers["x-request-id"].to_str().unwrap();
    let row = logged(&gateway, limited).expect("the rate-limited request is logged");
    assert_eq!(row["status"], 429, "{row}");
    assert_eq!(row["outcome"], "rate_limit_exceeded", "{row}");
    assert_eq!(row["workspace_id"], gateway.workspace_id.as_str(), "{row}");
    assert_eq!(row["cost_usd"], "0.000000000", "{row}");

    let url = format!("{}/v1/chat/completions", gateway.url);
    let unknown = format!("tg_live_{}", "A".repeat(40));
    let mut ids = Vec::new();
    for _ in 0..70 {
        let response = gateway
            .http
            .post(&url)
            .bearer_auth(&unknown)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
        ids.push(response.headers()["x-request-id"].to_str().unwrap().to_string());
    }
    let row = logged(&gateway, &ids[0]).expect("the first unknown key's request is logged");
    assert_eq!(row["status"], 401, "{row}");
    assert_eq!(row["outcome"], "invalid_api_key", "{row}");
    assert_eq!(row["workspace_id"], "", "{row}");
    let count = ids.iter().filter(|id| logged(&gateway, id).is_some()).count();
    // 60 at once, then one a second while the 70 were sent.
    assert!((60..70).contains(&count), "{count} of 70 logged");
    // The key itself is held to one request a minute: the health check says the
    // gateway still serves.
    let health = gateway
        .http
        .get(format!("{}/healthz", gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

/// `tollgate admin request ID` as JSON, or `None` when no row has that id.
fn logged(gateway: &Gateway, id: &str) -> Option<serde_json::Value> {
    let output = std::process::Command::new(common::BIN)
        .args(["admin", "request", id, "--config"])
        .arg(&gateway.config_path)
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| serde_json::from_slice(&output.stdout).unwrap())
}

/// With the wallet off (`ledger.enabled = false`) nothing is reserved or
/// billed, but every request still leaves its row: answered, refused before
/// routing, and failed upstream, each with cost 0 and the wallet untouched.
#[tokio::test]
async fn with_the_ledger_disabled_every_request_still_leaves_a_row() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[ledger]\nenabled = false\n")).await;
    let posted = gateway.wallet()["posted_usd"].clone();
    let cases = [
        (
            json!({"model": "mock/small", "messages": [{"role": "user", "content": "hi"}]}),
            200,
            "success",
        ),
        (
            json!({"model": "nobody/nothing", "messages": [{"role": "user", "content": "x"}]}),
            404,
            "model_not_found",
        ),
        (json!({"model": "mock/small"}), 400, "invalid_request"),
        (
            json!({"model": "bad/trap", "messages": [{"role": "user", "content": "x"}]}),
            502,
            "adapter_failed",
        ),
    ];
    for (body, status, outcome) in cases {
        let (got, headers, answer) = gateway.chat(body.clone()).await;
        assert_eq!(got, status, "{body} → {answer}");
        let id = headers["x-request-id"].to_str().unwrap().to_string();
        let row: serde_json::Value = serde_json::from_str(&gateway.admin(&["request", &id])).unwrap();
        // A failed attempt's row has no upstream status.
        if status != 502 {
            assert_eq!(row["status"], status, "{row}");
        }
        assert!(
            row["outcome"].as_str().unwrap().starts_with(outcome),
            "{outcome}: {row}"
        );
        assert_eq!(
            row["cost_usd"], "0.000000000",
            "nothing is billed with the wallet off: {row}"
        );
        assert_eq!(row["reserved_usd"], "0.000000000", "nor reserved: {row}");
    }
    assert_eq!(gateway.wallet()["posted_usd"], posted);
    gateway.assert_still_serving().await;
}
