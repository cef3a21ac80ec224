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
models = [{{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }}]
"#
    );
    Gateway::start(&standard_config(mock, &extra)).await
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
