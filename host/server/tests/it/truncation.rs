//! A stream is finished only when the provider says so. The mock's `eof-3`
//! models stream three content chunks in each protocol and then end the body
//! cleanly, without the protocol's terminal event (`finish_reason` and
//! `[DONE]`, `message_stop`, `finishReason`, `messageStop`, `message-end`):
//! what a proxy closing a long connection gracefully delivers. Every adapter
//! must take that for a failure, not for the whole answer.

use crate::common;

use std::net::SocketAddr;

use common::{Gateway, nanos, standard_config, start_mock};
use serde_json::{Value, json};

/// A provider per built-in adapter, each with an `eof` model cut after three
/// content chunks; `mock/small` (openai-compatible) answers in full.
fn config(mock: SocketAddr) -> String {
    let eof =
        r#"models = [{ id = "eof", upstream = "eof-3", input_price_per_mtok = "1", output_price_per_mtok = "2" }]"#;
    let extra = format!(
        r#"
[providers.compatible]
adapter = "openai-compatible"
base_url = "http://{mock}/v1"
api_key = "sk-compatible"
{eof}
[providers.anthropic]
base_url = "http://{mock}"
api_key = "sk-anthropic"
{eof}
[providers.gemini]
base_url = "http://{mock}/v1beta"
api_key = "gemini-key"
{eof}
[providers.bedrock]
base_url = "http://{mock}"
api_key = "AKIDEXAMPLE:fake-secret-for-tests"
{eof}
[providers.cohere]
base_url = "http://{mock}"
api_key = "cohere-key"
{eof}
[providers.azure-openai]
base_url = "http://{mock}?api-version=2024-10-21"
api_key = "azure-key"
{eof}
"#
    );
    standard_config(mock, &extra)
}

/// Every adapter's cut model.
const CUT: [&str; 6] = [
    "compatible/eof",
    "anthropic/eof",
    "gemini/eof",
    "bedrock/eof",
    "cohere/eof",
    "azure-openai/eof",
];

const PROMPT: &str = "one two three four five six";

fn posted(gateway: &Gateway) -> i64 {
    nanos(gateway.wallet()["posted_usd"].as_str().unwrap())
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

/// The request log's outcome for a request.
fn logged_outcome(gateway: &Gateway, request_id: &str) -> Value {
    let row: Value = serde_json::from_str(&gateway.admin(&["request", request_id])).unwrap();
    row["outcome"].clone()
}

/// One streamed request per cut model: the text the caller read, the
/// `[DONE]` count, the final chunk and what the wallet was charged.
struct Streamed {
    primary: &'static str,
    text: String,
    done: usize,
    last: Value,
    charged: i64,
}

async fn stream_each(gateway: &Gateway, fallbacks: &[&str]) -> Vec<Streamed> {
    let mut streamed = Vec::new();
    for primary in CUT {
        let before = posted(gateway);
        let request = json!({"model": primary, "models": fallbacks, "stream": true,
            "messages": [{"role": "user", "content": PROMPT}]});
        let (text, done, last) = stream_answer(gateway, request).await;
        let charged = before - posted(gateway);
        streamed.push(Streamed {
            primary,
            text,
            done,
            last,
            charged,
        });
    }
    streamed
}

/// Each adapter's first attempt outcome, to compare all at once: a failure
/// names every adapter that got it wrong.
fn first_outcomes(streamed: &[Streamed]) -> Vec<(&'static str, Value)> {
    streamed
        .iter()
        .map(|s| (s.primary, s.last["service"]["attempts"][0]["outcome"].clone()))
        .collect()
}

fn expected_outcomes(outcome: &str) -> Vec<(&'static str, Value)> {
    CUT.iter().map(|primary| (*primary, Value::from(outcome))).collect()
}

#[tokio::test]
async fn a_stream_that_ends_before_its_terminal_event_fails_over_and_continues() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let streamed = stream_each(&gateway, &["mock/small"]).await;
    assert_eq!(first_outcomes(&streamed), expected_outcomes("upstream_truncated"));
    for Streamed {
        primary,
        text,
        done,
        last,
        charged,
    } in &streamed
    {
        assert_eq!(
            *text,
            format!("You said: {PROMPT}"),
            "{primary}: the cut answer and its continuation read as one"
        );
        assert_eq!(*done, 1, "{primary}");
        assert_eq!(last["provider"], "mock", "{primary}: {last}");
        let attempts = last["service"]["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{primary}: {last}");
        assert_eq!(attempts[0]["provider"], primary.split('/').next().unwrap());
        assert_eq!(attempts[1]["outcome"], "success", "{primary}");
        // The partial answer is billed as a partial answer, the continuation
        // as an answer: both, once each, adding up to what was posted.
        let costs: Vec<i64> = attempts
            .iter()
            .map(|a| nanos(a["cost_usd"].as_str().unwrap()))
            .collect();
        assert!(costs.iter().all(|c| *c > 0), "{primary}: {attempts:?}");
        let cost = nanos(last["service"]["cost_usd"].as_str().unwrap());
        assert_eq!(costs.iter().sum::<i64>(), cost, "{primary}");
        assert_eq!(*charged, cost, "{primary}");
        let request_id = last["service"]["request_id"].as_str().unwrap();
        assert_eq!(logged_outcome(&gateway, request_id), "success", "{primary}");
    }
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

#[tokio::test]
async fn a_stream_that_ends_before_its_terminal_event_with_no_candidate_left_ends_in_an_error() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let streamed = stream_each(&gateway, &[]).await;
    assert_eq!(first_outcomes(&streamed), expected_outcomes("upstream_truncated"));
    for Streamed {
        primary,
        text,
        done,
        last,
        charged,
    } in &streamed
    {
        assert_eq!(text, "You said: one", "{primary}: what arrived was relayed");
        assert_eq!(*done, 1, "{primary}");
        assert_eq!(last["choices"][0]["finish_reason"], "error", "{primary}: {last}");
        assert_eq!(last["error"]["code"], "upstream_truncated", "{primary}: {last}");
        assert_eq!(last["error"]["type"], "upstream_error", "{primary}: {last}");
        assert_eq!(
            last["service"]["attempts"].as_array().unwrap().len(),
            1,
            "{primary}: {last}"
        );
        let request_id = last["service"]["request_id"].as_str().unwrap();
        assert_eq!(logged_outcome(&gateway, request_id), "upstream_truncated", "{primary}");
        // What the caller received is billed (docs/billing.md, partial answers).
        let cost = nanos(last["service"]["cost_usd"].as_str().unwrap());
        assert!(cost > 0, "{primary}: {last}");
        assert_eq!(*charged, cost, "{primary}");
    }
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

/// Anthropic's events as relayed on the native lane: `(event name, data)`.
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

/// `/v1/messages` on the anthropic adapter relays Anthropic's own events; a
/// body that ends before `message_stop` ends in Anthropic's `error` event
/// (a native stream never continues on another candidate).
#[tokio::test]
async fn a_native_stream_that_ends_before_message_stop_ends_in_an_error_event() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let before = posted(&gateway);
    let request = json!({"model": "anthropic/eof", "models": ["mock/small"], "max_tokens": 50, "stream": true,
                         "messages": [{"role": "user", "content": PROMPT}]});
    let response = gateway.post("/v1/messages").json(&request).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_string();
    let text = response.text().await.unwrap();
    let events = events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert!(!names.contains(&"message_stop"), "{text}");
    let (name, error) = events.last().unwrap();
    assert_eq!(name, "error", "{text}");
    assert_eq!(error["error"]["code"], "upstream_truncated", "{error}");
    let attempts = error["service"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "no second candidate: {error}");
    assert_eq!(attempts[0]["outcome"], "upstream_truncated", "{error}");
    assert_eq!(logged_outcome(&gateway, &request_id), "upstream_truncated");
    let cost = nanos(error["service"]["cost_usd"].as_str().unwrap());
    assert!(cost > 0, "{error}");
    assert_eq!(before - posted(&gateway), cost);
}
