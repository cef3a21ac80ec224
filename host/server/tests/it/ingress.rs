//! `POST /v1/messages` and `POST /v1/responses` against the real binary: the
//! chat pipeline behind both (wallet debit, fallback, provenance), their raw
//! event streams and error shapes, and `created` stamped on streamed chunks.

use crate::common;

use common::{Gateway, nanos, standard_config, start_mock};
use serde_json::{Value, json};

async fn setup() -> Gateway {
    let mock = start_mock(Default::default()).await;
    let extra = format!(
        r#"
[providers.anthropic]
base_url = "http://{mock}"
api_key = "sk-anthropic"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "native", upstream = "claude-sonnet-4-5", input_price_per_mtok = "3", output_price_per_mtok = "15", cache_read_price_per_mtok = "0.30", cache_write_price_per_mtok = "3.75" }},
]
"#
    );
    Gateway::start(&standard_config(mock, &extra)).await
}

async fn setup_with_mock() -> (Gateway, std::net::SocketAddr) {
    let mock = start_mock(Default::default()).await;
    let extra = format!(
        r#"
[providers.anthropic]
base_url = "http://{mock}"
api_key = "sk-anthropic"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "native", upstream = "claude-sonnet-4-5", input_price_per_mtok = "3", output_price_per_mtok = "15", cache_read_price_per_mtok = "0.30", cache_write_price_per_mtok = "3.75" }},
]
"#
    );
    (Gateway::start(&standard_config(mock, &extra)).await, mock)
}

/// The bodies of the Messages requests the mock upstream received, oldest first.
async fn upstream_messages(mock: std::net::SocketAddr) -> Vec<Value> {
    common::mock_requests(mock)
        .await
        .into_iter()
        .filter(|r| r["path"] == "/v1/messages")
        .map(|r| r["body"].clone())
        .collect()
}

/// A `usage.cost` number (USD) in nanodollars.
fn shown_nanos(cost: &Value) -> i64 {
    (cost.as_f64().unwrap() * 1e9).round() as i64
}

/// What `anthropic/native` costs for Anthropic's usage object, in nanodollars:
/// 3, 15, 0.30 and 3.75 USD per Mtok of input, output, cache read, cache write.
fn native_cost(usage: &Value) -> i64 {
    let count = |key: &str| usage[key].as_i64().unwrap();
    count("input_tokens") * 3_000
        + count("output_tokens") * 15_000
        + count("cache_read_input_tokens") * 300
        + count("cache_creation_input_tokens") * 3_750
}

/// `event: NAME` / `data: JSON` pairs of an SSE body.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let name = frame
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_default();
            let data = frame.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            (name.to_string(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

fn posted(gateway: &Gateway) -> i64 {
    nanos(gateway.wallet()["posted_usd"].as_str().unwrap())
}

#[tokio::test]
async fn messages_whole_and_streamed_bill_like_chat() {
    let gateway = setup().await;
    let before = posted(&gateway);
    let request = json!({"model": "mock/small", "max_tokens": 50, "system": "Be brief.",
                         "messages": [{"role": "user", "content": "hello claude"}]});
    let response = gateway.post("/v1/messages").json(&request).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_string();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "message");
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "You said: hello claude"}])
    );
    assert_eq!(body["usage"]["input_tokens"], 12);
    assert_eq!(body["usage"]["output_tokens"], 4);
    assert_eq!(body["provider"], "mock");
    assert_eq!(body["model"], "mock/small", "the id asked for: {body}");
    assert_eq!(body["service"]["upstream_model"], "small");
    assert_eq!(body["service"]["request_id"], request_id);
    // 12 × 0.50 + 4 × 1.50 USD per Mtok.
    let cost = nanos(body["service"]["cost_usd"].as_str().unwrap());
    assert_eq!(cost, 12 * 500 + 4 * 1500);
    assert_eq!(body["usage"]["cost"], json!(0.000012));
    assert_eq!(before - posted(&gateway), cost);

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let text = gateway
        .post("/v1/messages")
        .json(&streamed)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(events[0].1["message"]["model"], "mock/small");
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    let delta = &events[names.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["input_tokens"], 12);
    assert_eq!(delta["provider"], "mock");
    assert_eq!(
        nanos(delta["service"]["cost_usd"].as_str().unwrap()),
        12 * 500 + 4 * 1500
    );
    let said: String = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, e)| e["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(said, "You said: hello claude");
}

#[tokio::test]
async fn messages_fall_back_and_answer_errors_in_anthropics_shape() {
    let gateway = setup().await;
    let fallback = json!({"model": "anthropic/limited", "models": ["mock/small"], "max_tokens": 20,
                          "messages": [{"role": "user", "content": "fall back"}]});
    let body: Value = gateway
        .post("/v1/messages")
        .json(&fallback)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["provider"], "mock");
    let outcomes: Vec<&str> = body["service"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["upstream_rate_limited", "success"]);

    for (request, status, kind) in [
        (
            json!({"model": "anthropic/limited", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
            429,
            "rate_limit_error",
        ),
        (
            json!({"model": "nobody/none", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
            404,
            "not_found_error",
        ),
        (
            json!({"model": "mock/small", "messages": [{"role": "user", "content": "x"}]}),
            400,
            "invalid_request_error",
        ),
        (
            json!({"model": "mock/small", "max_tokens": 5, "messages": "x"}),
            400,
            "invalid_request_error",
        ),
    ] {
        let response = gateway.post("/v1/messages").json(&request).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{request}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["type"], "error", "{body}");
        assert_eq!(body["error"]["type"], kind, "{body}");
        assert!(body["request_id"].as_str().unwrap().starts_with("req_"));
    }
    let bad_json = gateway
        .post("/v1/messages")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 400);
    let anonymous = reqwest::Client::new()
        .post(format!("{}/v1/messages", gateway.url))
        .json(&fallback)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let body: Value = anonymous.json().await.unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn responses_whole_streamed_and_refused() {
    let gateway = setup().await;
    let before = posted(&gateway);
    let request = json!({"model": "mock/small", "instructions": "Be brief.", "input": "hello responses"});
    let body: Value = gateway
        .post("/v1/responses")
        .json(&request)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["content"][0]["text"], "You said: hello responses");
    assert_eq!(body["usage"]["total_tokens"], 16);
    assert_eq!(body["store"], false);
    let cost = nanos(body["service"]["cost_usd"].as_str().unwrap());
    assert_eq!(cost, 12 * 500 + 4 * 1500);
    assert_eq!(before - posted(&gateway), cost);

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let text = gateway
        .post("/v1/responses")
        .json(&streamed)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = events(&text);
    assert_eq!(events[0].0, "response.created");
    let (last, done) = events.last().unwrap();
    assert_eq!(last, "response.completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        "You said: hello responses"
    );
    assert_eq!(done["response"]["provider"], "mock");
    for (index, (name, event)) in events.iter().enumerate() {
        assert_eq!(event["type"], name.as_str());
        assert_eq!(event["sequence_number"], index);
    }

    let refused = gateway
        .post("/v1/responses")
        .json(&json!({"model": "mock/small", "input": "hi", "previous_response_id": "resp_1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    common::assert_error_shape(&body);
}

#[tokio::test]
async fn streamed_chunks_never_carry_created_zero() {
    let gateway = setup().await;
    // The Anthropic adapter has no clock: it leaves `created` 0.
    let (status, frames) = gateway
        .chat_stream(json!({"model": "anthropic/claude-haiku-4-5", "stream": true, "messages": [{"role": "user", "content": "a b c"}]}))
        .await;
    assert_eq!(status, 200);
    assert!(frames.len() > 3, "{frames:?}");
    for frame in frames.iter().filter(|f| *f != "[DONE]") {
        let chunk: Value = serde_json::from_str(frame).unwrap();
        assert!(chunk["created"].as_u64().is_some_and(|c| c > 1_600_000_000), "{frame}");
    }
}

/// Against the anthropic adapter (WIT 0.2.0, `anthropic-messages` natively),
/// `/v1/messages` passes the caller's body through: `cache_control`,
/// `thinking`, a `document` block and an earlier turn's signed `thinking`
/// block reach the upstream verbatim, the answer's `thinking` block comes
/// back (whole, and streamed as `thinking_delta` / `signature_delta`), and
/// the wallet pays exactly the cost of the usage, cache reads at their price.
#[tokio::test]
async fn messages_pass_through_natively_to_the_anthropic_adapter() {
    let (gateway, mock) = setup_with_mock().await;
    let system = json!([{"type": "text", "text": "You are a careful reader of long contracts and other documents.",
                         "cache_control": {"type": "ephemeral"}}]);
    let document = json!({"type": "document", "source": {"type": "text", "media_type": "text/plain",
                          "data": "The lease runs for twelve months."}, "title": "Lease", "citations": {"enabled": true}});
    let earlier_thinking =
        json!({"type": "thinking", "thinking": "The user wants the term.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"});
    let question = json!({"type": "text", "text": "How long does the lease run?", "cache_control": {"type": "ephemeral", "ttl": "5m"}});
    let request = json!({
        "model": "anthropic/native", "models": ["mock/small"], "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "system": system,
        "messages": [
            {"role": "user", "content": [document.clone(), {"type": "text", "text": "Read this."}]},
            {"role": "assistant", "content": [earlier_thinking.clone(), {"type": "text", "text": "I have read it."}]},
            {"role": "user", "content": [question.clone()]},
        ],
        "metadata": {"user_id": "u-1"},
        "mock": {"cached_tokens": 8, "cache_write_tokens": 4},
    });

    let before = posted(&gateway);
    let response = gateway.post("/v1/messages").json(&request).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_string();
    let body: Value = response.json().await.unwrap();

    let sent = upstream_messages(mock).await;
    assert_eq!(sent.len(), 1, "one upstream call: {sent:?}");
    let sent = &sent[0];
    assert_eq!(sent["model"], "claude-sonnet-4-5");
    assert_eq!(sent["system"], system, "cache_control on the system block kept");
    assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
    assert_eq!(sent["messages"][0]["content"][0], document, "the document block kept");
    assert_eq!(
        sent["messages"][1]["content"][0], earlier_thinking,
        "the signed thinking block kept"
    );
    assert_eq!(
        sent["messages"][2]["content"][0], question,
        "cache_control on a content block kept"
    );
    assert_eq!(sent["metadata"], json!({"user_id": "u-1"}));
    assert_eq!(sent["max_tokens"], 2048);
    assert!(
        sent.get("models").is_none(),
        "the gateway's fields are not sent: {sent}"
    );
    assert!(sent.get("stream").is_none(), "{sent}");

    assert_eq!(body["type"], "message", "{body}");
    assert!(body["id"].as_str().unwrap().starts_with("msg_mock_"), "{body}");
    assert_eq!(
        body["model"], "anthropic/native",
        "the id asked for, not the upstream's name"
    );
    let thinking = &body["content"][0];
    assert_eq!(thinking["type"], "thinking", "{body}");
    assert!(
        thinking["thinking"].as_str().unwrap().starts_with("Thinking it over"),
        "{body}"
    );
    assert!(
        thinking["signature"].as_str().unwrap().starts_with("sig_mock_"),
        "{body}"
    );
    assert_eq!(body["content"][1]["type"], "text", "{body}");
    assert_eq!(body["provider"], "anthropic");
    assert_eq!(body["service"]["request_id"], request_id);
    assert_eq!(body["service"]["upstream_model"], "claude-sonnet-4-5");
    let usage = &body["usage"];
    assert_eq!(usage["cache_read_input_tokens"], 8, "{usage}");
    assert_eq!(usage["cache_creation_input_tokens"], 4, "{usage}");
    assert_eq!(
        usage["service_tier"], "standard",
        "the upstream's own usage fields stay: {usage}"
    );
    let cost = nanos(body["service"]["cost_usd"].as_str().unwrap());
    assert_eq!(cost, native_cost(usage), "{body}");
    let breakdown = &body["service"]["cost_breakdown"];
    assert_eq!(breakdown["cache_read"]["tokens"], 8, "{breakdown}");
    assert_eq!(
        breakdown["cache_read"]["cost_usd"], "0.000002400000",
        "8 × 0.30 USD/Mtok: {breakdown}"
    );
    assert_eq!(
        shown_nanos(&usage["cost"]),
        cost,
        "usage.cost is the cost billed: {usage}"
    );
    assert_eq!(
        before - posted(&gateway),
        cost,
        "the wallet paid exactly the cost shown"
    );

    // Streamed: the events pass through, thinking and signature deltas included.
    let before = posted(&gateway);
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let response = gateway.post("/v1/messages").json(&streamed).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let sent = upstream_messages(mock).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1]["stream"], true);
    assert_eq!(sent[1]["messages"], sent[0]["messages"], "the same body, streamed");
    let events = events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert_eq!(events[0].1["message"]["model"], "anthropic/native", "{text}");
    assert!(names.contains(&"ping"), "ping events pass through: {names:?}");
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"], "{text}");
    assert_eq!(events[1].1["content_block"]["type"], "thinking", "{text}");
    let deltas: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, e)| e["delta"]["type"].as_str().unwrap())
        .collect();
    assert!(deltas.contains(&"thinking_delta"), "{deltas:?}");
    assert!(deltas.contains(&"signature_delta"), "{deltas:?}");
    let thought: String = events
        .iter()
        .filter(|(_, e)| e["delta"]["type"] == "thinking_delta")
        .map(|(_, e)| e["delta"]["thinking"].as_str().unwrap())
        .collect();
    assert_eq!(
        thought,
        thinking["thinking"].as_str().unwrap(),
        "the same reasoning, streamed"
    );
    let start_usage = &events[0].1["message"]["usage"];
    let delta = &events[names.len() - 2].1;
    assert_eq!(delta["provider"], "anthropic", "{delta}");
    let stream_cost = nanos(delta["service"]["cost_usd"].as_str().unwrap());
    let mut usage = start_usage.clone();
    usage["output_tokens"] = delta["usage"]["output_tokens"].clone();
    assert_eq!(stream_cost, native_cost(&usage), "{usage} {delta}");
    assert_eq!(shown_nanos(&delta["usage"]["cost"]), stream_cost, "{delta}");
    assert_eq!(
        before - posted(&gateway),
        stream_cost,
        "the wallet paid exactly the streamed cost"
    );
    gateway.assert_still_serving().await;
}

/// A native candidate that fails falls back to an OpenAI-compatible one,
/// which gets the translated body; a request with a `document` block has no
/// translated form, so only native candidates may serve it.
#[tokio::test]
async fn native_and_translated_candidates_share_the_fallback_list() {
    let (gateway, mock) = setup_with_mock().await;
    let request = json!({"model": "anthropic/limited", "models": ["mock/small"], "max_tokens": 20,
                         "thinking": {"type": "disabled"},
                         "messages": [{"role": "user", "content": [{"type": "text", "text": "fall back", "cache_control": {"type": "ephemeral"}}]}]});
    let body: Value = gateway
        .post("/v1/messages")
        .json(&request)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["provider"], "mock", "{body}");
    assert_eq!(body["content"][0]["text"], "You said: fall back", "{body}");
    let sent = upstream_messages(mock).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["model"], "fail-429");
    assert_eq!(
        sent[0]["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );

    let document = json!({"model": "mock/small", "max_tokens": 20, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}},
        {"type": "text", "text": "sum up"}]}]});
    let response = gateway.post("/v1/messages").json(&document).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("anthropic-messages"),
        "{body}"
    );

    let mut to_anthropic = document.clone();
    to_anthropic["model"] = json!("anthropic/native");
    to_anthropic["models"] = json!(["mock/small"]);
    let response = gateway.post("/v1/messages").json(&to_anthropic).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["provider"], "anthropic", "{body}");
    assert_eq!(
        upstream_messages(mock).await.last().unwrap()["messages"][0]["content"][0]["type"],
        "document"
    );
}

/// A native stream that fails after content was relayed is not continued on
/// another candidate (that would start a second message): it ends in
/// Anthropic's `error` event, with what the attempt cost, billed.
#[tokio::test]
async fn a_broken_native_stream_ends_in_an_error_event() {
    let (gateway, mock) = setup_with_mock().await;
    let before = posted(&gateway);
    let request = json!({"model": "anthropic/native", "models": ["mock/small"], "max_tokens": 50, "stream": true,
                         "messages": [{"role": "user", "content": "one two three four five"}],
                         "mock": {"stream_error_after": 2}});
    let response = gateway.post("/v1/messages").json(&request).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let events = events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert_eq!(names.iter().filter(|n| **n == "message_start").count(), 1, "{text}");
    assert!(!names.contains(&"message_stop"), "{text}");
    let (name, error) = events.last().unwrap();
    assert_eq!(name, "error", "{text}");
    assert_eq!(error["error"]["type"], "rate_limit_error", "{error}");
    let attempts = error["service"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "no second candidate: {error}");
    assert_eq!(attempts[0]["provider"], "anthropic");
    let cost = nanos(error["service"]["cost_usd"].as_str().unwrap());
    assert!(cost > 0, "the input read upstream is billed: {error}");
    assert_eq!(before - posted(&gateway), cost);
    assert_eq!(upstream_messages(mock).await.len(), 1);
}

/// Claude Code's first request (issue 34): a system message inside
/// `messages` and an `anthropic-beta` header; an unknown model is a 404
/// before the body's roles are looked at.
#[tokio::test]
async fn a_system_message_within_the_conversation_is_served() {
    let gateway = setup().await;
    let request = json!({"model": "mock/small", "max_tokens": 50, "messages": [
        {"role": "user", "content": "hello"},
        {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
        {"role": "user", "content": "again"}]});
    let response = gateway
        .post("/v1/messages")
        .header("anthropic-beta", "mid-conversation-system-2026-04-07")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["content"][0]["text"], "You said: again", "{body}");
    // 1 + 4, 2 + 4 and 1 + 4 words: the system turn was sent as one.
    assert_eq!(body["usage"]["input_tokens"], 16, "{body}");

    // A block this path refuses, to a model that does not exist: the model is named.
    let mut unknown = request.clone();
    unknown["model"] = json!("claude-opus-4-8");
    unknown["messages"][2]["content"] = json!([{"type": "video"}]);
    let response = gateway.post("/v1/messages").json(&unknown).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found_error", "{body}");
}
