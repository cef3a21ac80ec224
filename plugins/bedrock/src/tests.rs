//! Golden tests (`tests/golden/*.json`, run by the SDK's `golden` module,
//! whose docs give the format) plus a few cases easier to state in code.

use serde_json::{Value, json};
use tollgate_plugin_sdk::golden::Goldens;
use tollgate_plugin_sdk::{Adapter, CallContext, ErrorClass, Event, ResponseHead};

use crate::Bedrock;

/// Headers that carry or derive from the credential: only the host sets them.
const SECRET_HEADERS: [&str; 4] = [
    "authorization",
    "x-amz-security-token",
    "x-amz-date",
    "x-amz-content-sha256",
];

/// Strings no golden may contain (credential-looking test values).
const SECRET_MARKERS: [&str; 5] = ["test-key", "sk-", "akid", "aws4-hmac", "wjalrxutnfemi"];

#[test]
fn golden_files() {
    Goldens {
        dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"),
        secret_headers: &SECRET_HEADERS,
        secret_markers: &SECRET_MARKERS,
    }
    .check::<Bedrock>();
}

fn streaming(continuation: Option<&str>) -> Bedrock {
    let ctx = CallContext {
        request_id: "r".into(),
        upstream_model: "amazon.nova-lite-v1:0".into(),
        base_url: "https://bedrock-runtime.us-east-1.amazonaws.com".into(),
        stream: true,
        attempt: 1,
        max_output_tokens: Some(64),
        continuation: continuation.map(str::to_owned),
    };
    let mut adapter = Bedrock::new(
        ctx,
        br#"{"model":"bedrock/x","messages":[{"role":"user","content":"hi"}]}"#.to_vec(),
    );
    adapter.request().unwrap();
    adapter
}

fn event(name: &str, data: Value) -> Event {
    Event {
        name: Some(name.into()),
        data: data.to_string().into_bytes(),
    }
}

fn contents(chunks: &[Vec<u8>]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| serde_json::from_slice::<Value>(c).unwrap())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn json_documents_keep_their_key_order() {
    let ctx = CallContext {
        request_id: "r".into(),
        upstream_model: "m".into(),
        base_url: "https://bedrock-runtime.us-east-1.amazonaws.com".into(),
        stream: false,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    };
    let body = br#"{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{\"z\":1,\"a\":2}"}}]},{"role":"tool","tool_call_id":"t","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"z":{},"a":{}}}}}],"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"name":{},"age":{}}}}}}"#;
    let mut adapter = Bedrock::new(ctx, body.to_vec());
    let sent = String::from_utf8(adapter.request().unwrap().body).unwrap();
    for kept in [
        r#""input":{"z":1,"a":2}"#,
        r#""properties":{"z":{},"a":{}}"#,
        r#""properties":{"name":{},"age":{}}"#,
    ] {
        assert!(sent.contains(kept), "{kept} not in {sent}");
    }
    let answer = br#"{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"u","name":"json_response","input":{"name":"Ada","age":36}}}]}},"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}"#;
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let out: Value = serde_json::from_slice(&adapter.response(head, answer.to_vec()).unwrap()).unwrap();
    assert_eq!(out["choices"][0]["message"]["content"], r#"{"name":"Ada","age":36}"#);
}

#[test]
fn continuation_drops_the_whitespace_cut_from_the_prefill() {
    let mut adapter = streaming(Some("You said: hi "));
    let chunks = adapter
        .on_events(vec![
            event("messageStart", json!({"role": "assistant"})),
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": " there"}}),
            ),
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": " again"}}),
            ),
        ])
        .unwrap();
    assert_eq!(contents(&chunks), ["", "there", " again"]);
}

#[test]
fn a_stream_without_message_stop_is_an_upstream_failure() {
    let mut adapter = streaming(None);
    adapter
        .on_events(vec![
            event("messageStart", json!({"role": "assistant"})),
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
            ),
        ])
        .unwrap();
    let error = adapter.finish().unwrap_err();
    assert_eq!(error.class, ErrorClass::Upstream(502));
}

#[test]
fn unknown_events_are_skipped_and_odd_ones_refused() {
    let mut adapter = streaming(None);
    let chunks = adapter.on_events(vec![event("somethingNew", json!({"x": 1}))]).unwrap();
    assert!(chunks.is_empty());
    let error = adapter
        .on_events(vec![Event {
            name: None,
            data: b"{\"choices\":[]}".to_vec(),
        }])
        .unwrap_err();
    assert_eq!(error.class, ErrorClass::Internal);
    let error = adapter
        .on_events(vec![event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 3, "delta": {"toolUse": {"input": "{"}}}),
        )])
        .unwrap_err();
    assert_eq!(error.class, ErrorClass::Internal);
}
