//! The OpenAI-compatible request path against the real binary and the mock.

use crate::common;

use common::{Gateway, mock_requests, standard_config, start_mock};
use serde_json::{Value, json};

async fn setup() -> (Gateway, std::net::SocketAddr) {
    let mock = start_mock(Default::default()).await;
    (Gateway::start(&standard_config(mock, "")).await, mock)
}

#[tokio::test]
async fn non_streaming_answer_carries_provenance_and_exact_cost() {
    let (gateway, _mock) = setup().await;
    let (status, headers, body) = gateway
        .chat(json!({"model": "mock/small", "messages": [{"role": "user", "content": "say hello"}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "You said: say hello");
    assert_eq!(body["provider"], "mock");
    // Mock usage: prompt = 2 words + 4 = 6, completion = 4 words.
    assert_eq!(body["usage"]["prompt_tokens"], 6);
    assert_eq!(body["usage"]["completion_tokens"], 4);
    // 6 × 0.50/Mtok + 4 × 1.50/Mtok = 0.000009 USD exactly.
    assert_eq!(body["usage"]["cost"].as_f64(), Some(0.000009));
    assert_eq!(body["service"]["cost_usd"], "0.000009000");
    let request_id = body["service"]["request_id"].as_str().unwrap();
    assert!(request_id.starts_with("req_"));
    assert_eq!(headers["x-request-id"].to_str().unwrap(), request_id);
    assert_eq!(body["service"]["attempts"][0]["outcome"], "success");
}

#[tokio::test]
async fn request_fields_pass_through_and_only_model_is_rewritten() {
    let (gateway, mock) = setup().await;
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let request = json!({
        "model": "mock/renamed",
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": tools,
        "tool_choice": "auto",
        "temperature": 0.25,
        "response_format": {"type": "json_object"},
        "x_vendor_extension": {"nested": [1, 2, 3]},
        "seed": 7,
    });
    let (status, _, body) = gateway.chat(request.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "mock"}));

    let recorded = mock_requests(mock).await;
    let sent = &recorded.last().unwrap()["body"];
    assert_eq!(sent["model"], "large", "model is rewritten to the upstream name");
    for field in [
        "messages",
        "tools",
        "tool_choice",
        "temperature",
        "response_format",
        "x_vendor_extension",
        "seed",
    ] {
        assert_eq!(sent[field], request[field], "{field} must pass unchanged");
    }
    let headers = &recorded.last().unwrap()["headers"];
    assert_eq!(
        headers["authorization"], "Bearer sk-test-upstream",
        "the host injects the provider key"
    );
}

#[tokio::test]
async fn json_schema_response_format_is_honoured() {
    let (gateway, _mock) = setup().await;
    let schema = json!({"type": "object", "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
        "required": ["answer", "score"], "additionalProperties": false});
    let (status, _, body) = gateway
        .chat(json!({"model": "mock/small", "messages": [{"role": "user", "content": "rate it"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "rating", "strict": true, "schema": schema}}}))
        .await;
    assert_eq!(status, 200, "{body}");
    let content: Value = serde_json::from_str(body["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert!(content["answer"].is_string() && content["score"].is_i64(), "{content}");
}

#[tokio::test]
async fn streaming_frames_carry_provider_and_end_with_usage_then_done() {
    let (gateway, mock) = setup().await;
    let (status, frames) = gateway
        .chat_stream(json!({"model": "mock/small", "stream": true, "messages": [{"role": "user", "content": "stream this please"}]}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"), "{frames:?}");
    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    assert!(chunks.iter().all(|c| c["provider"] == "mock"), "{chunks:?}");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "You said: stream this please");
    let last = chunks.last().unwrap();
    // prompt = 3 + 4 = 7, completion = 5: 7 × 0.5 + 5 × 1.5 = 11 µUSD.
    assert_eq!(last["usage"]["prompt_tokens"], 7);
    assert_eq!(last["usage"]["completion_tokens"], 5);
    assert_eq!(last["usage"]["cost"].as_f64(), Some(0.000011));
    assert!(last["service"]["request_id"].as_str().unwrap().starts_with("req_"));
    // Usage appears exactly once, on the final chunk.
    assert_eq!(chunks.iter().filter(|c| c["usage"].is_object()).count(), 1);

    let recorded = mock_requests(mock).await;
    let sent = &recorded.last().unwrap()["body"];
    assert_eq!(
        sent["stream_options"]["include_usage"], true,
        "the adapter asks for usage"
    );
}

#[tokio::test]
async fn streamed_tool_calls_arrive_in_fragments() {
    let (gateway, _mock) = setup().await;
    let (status, frames) = gateway
        .chat_stream(
            json!({"model": "mock/small", "stream": true, "messages": [{"role": "user", "content": "call it"}],
            "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object",
                "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]}),
        )
        .await;
    assert_eq!(status, 200);
    let chunks: Vec<Value> = frames
        .iter()
        .filter(|f| *f != "[DONE]")
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&arguments).unwrap(), json!({"q": "mock"}));
    assert!(chunks.iter().any(|c| c["choices"][0]["finish_reason"] == "tool_calls"));
}

#[tokio::test]
async fn models_list_shows_ids_owners_availability_and_prices() {
    let (gateway, _mock) = setup().await;
    let response = gateway.get("/v1/models").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let data = body["data"].as_array().unwrap();
    let small = data
        .iter()
        .find(|m| m["id"] == "mock/small")
        .expect("mock/small listed");
    assert_eq!(small["owned_by"], "mock");
    assert_eq!(small["service"]["available"], true);
    assert_eq!(small["pricing"]["prompt"], "0.000000500000");
    assert_eq!(small["pricing"]["completion"], "0.000001500000");
    assert_eq!(small["context_length"], 128000);
    // Built-in providers without a key are listed but unavailable.
    let openai = data
        .iter()
        .find(|m| m["id"] == "openai/gpt-4o-mini")
        .expect("built-in catalog listed");
    assert_eq!(openai["service"]["available"], false);
    assert!(data.iter().all(|m| m["id"].as_str().unwrap().contains('/')));

    let one: Value = gateway.model("mock/small").await;
    assert_eq!(one["id"], "mock/small");
}
