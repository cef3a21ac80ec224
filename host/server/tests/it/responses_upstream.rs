//! A model served only by OpenAI's Responses API, called with chat
//! completions: the `openai-responses` adapter against the mock's
//! `/v1/responses`, whole and streamed, with tools, billing and fallback.

use crate::common;

use common::{Gateway, standard_config, start_mock};
use serde_json::{Value, json};

const EXTRA: &str = r#"
[[providers.mock.models]]
id = "pro"
upstream = "gpt-9-pro"
adapter = "openai-responses"
input_price_per_mtok = "15"
output_price_per_mtok = "120"
[[providers.mock.models]]
id = "pro-cut"
upstream = "cut-3"
adapter = "openai-responses"
input_price_per_mtok = "15"
output_price_per_mtok = "120"
"#;

async fn last_upstream_request(mock: std::net::SocketAddr) -> Value {
    common::mock_requests(mock).await.pop().unwrap()
}

#[tokio::test]
async fn a_responses_only_model_answers_chat_completions_whole_and_streamed() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, EXTRA)).await;

    let (status, _, body) = gateway
        .chat(json!({"model": "mock/pro", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "say hello"},
        ]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "You said: say hello");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["service"]["attempts"][0]["adapter"], "openai-responses");
    // The mock counts (words + 4) per message: 2 + 4 and 2 + 4 in, 4 out.
    assert_eq!(body["usage"]["prompt_tokens"], 12);
    assert_eq!(body["usage"]["completion_tokens"], 4);
    // 12 × 15/Mtok + 4 × 120/Mtok = 0.00066 USD exactly.
    assert_eq!(body["service"]["cost_usd"], "0.000660000");
    let sent = last_upstream_request(mock).await;
    assert_eq!(sent["path"], "/v1/responses");
    assert_eq!(sent["body"]["model"], "gpt-9-pro");
    assert_eq!(sent["body"]["store"], false);
    assert_eq!(
        sent["body"]["input"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert!(sent["body"].get("messages").is_none(), "{sent}");

    let (status, frames) = gateway
        .chat_stream(json!({"model": "mock/pro", "stream": true,
                            "messages": [{"role": "user", "content": "one two three"}]}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "You said: one two three");
    assert!(chunks.iter().any(|c| c["choices"][0]["finish_reason"] == "stop"));
    let last = chunks.last().unwrap();
    assert_eq!(last["usage"]["completion_tokens"], 5, "{last}");
}

#[tokio::test]
async fn tools_round_trip_and_unsupported_parameters_are_refused_before_any_call() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, EXTRA)).await;
    let tools = json!([{"type": "function", "function": {"name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let (status, _, body) = gateway
        .chat(json!({"model": "mock/pro", "tools": tools, "tool_choice": "required",
                     "messages": [{"role": "user", "content": "weather in Paris?"}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    let call = &message["tool_calls"][0];
    assert_eq!(call["function"]["name"], "weather");
    assert_eq!(call["function"]["arguments"], "{\"city\":\"mock\"}");
    let sent = last_upstream_request(mock).await;
    assert_eq!(
        sent["body"]["tools"][0]["name"], "weather",
        "flat function tools: {sent}"
    );

    // The result goes back as a function_call_output for the same call.
    let (status, _, body) = gateway
        .chat(json!({"model": "mock/pro", "tools": tools, "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
        ]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Tool result: sunny");
    let sent = last_upstream_request(mock).await;
    assert_eq!(sent["body"]["input"][1]["type"], "function_call");
    assert_eq!(sent["body"]["input"][2]["type"], "function_call_output");

    let before = last_upstream_request(mock).await;
    let (status, _, body) = gateway
        .chat(json!({"model": "mock/pro", "stop": ["\n"], "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("'stop'"), "{body}");
    assert_eq!(
        last_upstream_request(mock).await,
        before,
        "refused before any upstream call"
    );
}

#[tokio::test]
async fn a_cut_responses_stream_continues_on_the_next_candidate_as_one_answer() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, EXTRA)).await;
    let (status, frames) = gateway
        .chat_stream(
            json!({"model": "mock/pro-cut", "models": ["mock/small"], "stream": true,
                            "messages": [{"role": "user", "content": "one two three four five six"}]}),
        )
        .await;
    assert_eq!(status, 200);
    let chunks: Vec<Value> = frames
        .iter()
        .filter(|f| f.as_str() != "[DONE]")
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        text, "You said: one two three four five six",
        "one answer across the cut"
    );
    let last = chunks.last().unwrap();
    let attempts = last["service"]["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["adapter"], "openai-responses", "{last}");
    assert_eq!(attempts[0]["outcome"], "upstream_unreachable", "{last}");
    assert_eq!(attempts[1]["outcome"], "success", "{last}");
}
