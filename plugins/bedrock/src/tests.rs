//! Golden tests (`tests/golden/*.json`) plus a few cases easier to state in code.
//!
//! A golden file holds `exchanges`, each: the call `context`, the caller's
//! OpenAI `request`, then either `expected_request_error` (the adapter refuses
//! the request) or the `upstream_request` the adapter must build (method, URL,
//! headers, auth slot, body). After that, either an upstream `response` (with
//! optional `response_headers`) and the OpenAI `expected_response`; an
//! upstream `stream` of ConverseStream events (`{"event": <:event-type or
//! :exception-type>, "data": <JSON payload>}`) and the `expected_chunks`
//! (including those `finish` returns), or `expected_stream_error` when the
//! stream fails; or an upstream HTTP `error` and the `expected_error` class and
//! message. `expected_usage` when usage is reported.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event, ResponseHead};

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

/// The payloads an exchange feeds the adapter, as written in the file: a
/// `Value` would sort their keys, and key order must survive translation.
#[derive(Deserialize)]
struct RawGolden {
    exchanges: Vec<RawExchange>,
}

#[derive(Deserialize)]
struct RawExchange {
    request: Box<RawValue>,
    #[serde(default)]
    response: Option<Box<RawValue>>,
    #[serde(default)]
    stream: Option<Vec<RawEvent>>,
}

#[derive(Deserialize)]
struct RawEvent {
    event: String,
    data: Box<RawValue>,
}

fn context(spec: &Value) -> CallContext {
    CallContext {
        request_id: spec["request_id"].as_str().unwrap_or("req-golden").into(),
        upstream_model: spec["upstream_model"].as_str().unwrap().into(),
        base_url: spec["base_url"].as_str().unwrap().into(),
        stream: spec["stream"].as_bool().unwrap_or(false),
        attempt: 0,
        max_output_tokens: spec["max_output_tokens"].as_u64().map(|n| n as u32),
        continuation: spec["continuation"].as_str().map(str::to_owned),
    }
}

fn head(status: u16, headers: &Value) -> ResponseHead {
    let mut list = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(map) = headers.as_object() {
        list.extend(map.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())));
    }
    ResponseHead { status, headers: list }
}

fn auth_name(auth: &AuthSlot) -> String {
    match auth {
        AuthSlot::None => "none".into(),
        AuthSlot::Bearer => "bearer".into(),
        AuthSlot::Header(name) => format!("header:{name}"),
        AuthSlot::Query(name) => format!("query:{name}"),
        AuthSlot::AwsSigv4(service) => format!("aws-sigv4:{service}"),
    }
}

fn error_json(error: &AdapterError) -> Value {
    json!({"class": error.class.to_string(), "message": error.message})
}

fn run_exchange(file: &str, index: usize, exchange: &Value, raw: &RawExchange) {
    let at = format!("{file} exchange {index}");
    let mut adapter = Bedrock::new(context(&exchange["context"]), raw.request.get().as_bytes().to_vec());
    let request = adapter.request();
    if let Some(expected) = exchange.get("expected_request_error") {
        let error = request.expect_err(&format!("{at}: request should fail"));
        assert_eq!(&error_json(&error), expected, "{at}: request error");
        return;
    }
    let request = request.unwrap_or_else(|e| panic!("{at}: request failed: {e:?}"));
    let expected = &exchange["upstream_request"];
    let headers: serde_json::Map<String, Value> = request
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    for secret in SECRET_HEADERS {
        assert!(
            !headers.contains_key(secret),
            "{at}: adapter set secret header {secret}"
        );
        assert!(
            expected["headers"].get(secret).is_none(),
            "{at}: golden names secret header {secret}"
        );
    }
    let actual = json!({
        "method": request.method,
        "url": request.url,
        "headers": headers,
        "auth": auth_name(&request.auth),
        "body": serde_json::from_slice::<Value>(&request.body).unwrap(),
    });
    assert_eq!(&actual, expected, "{at}: upstream request");

    if let Some(body) = &raw.response {
        let out = adapter
            .response(head(200, &exchange["response_headers"]), body.get().as_bytes().to_vec())
            .unwrap_or_else(|e| panic!("{at}: response failed: {e:?}"));
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out, exchange["expected_response"], "{at}: response");
    }
    if let Some(stream) = &raw.stream {
        let events = stream
            .iter()
            .map(|e| Event {
                name: Some(e.event.clone()),
                data: e.data.get().as_bytes().to_vec(),
            })
            .collect();
        let result = adapter.on_events(events).and_then(|mut chunks| {
            chunks.extend(adapter.finish()?);
            Ok(chunks)
        });
        match exchange.get("expected_stream_error") {
            Some(expected) => {
                let error = result.expect_err(&format!("{at}: stream should fail"));
                assert_eq!(&error_json(&error), expected, "{at}: stream error");
            }
            None => {
                let chunks = result.unwrap_or_else(|e| panic!("{at}: stream failed: {e:?}"));
                let chunks: Vec<Value> = chunks.iter().map(|c| serde_json::from_slice(c).unwrap()).collect();
                assert_eq!(Value::from(chunks), exchange["expected_chunks"], "{at}: chunks");
            }
        }
    }
    if let Some(error) = exchange.get("error") {
        let status = error["status"].as_u64().unwrap() as u16;
        let classified =
            adapter.classify_error(head(status, &error["headers"]), error["body"].to_string().into_bytes());
        assert_eq!(error_json(&classified), exchange["expected_error"], "{at}: error");
    }
    if let Some(usage) = exchange.get("expected_usage") {
        let got = adapter.usage().map(
            |u| json!({"input": u.input, "output": u.output, "cache_read": u.cache_read, "cache_write": u.cache_write}),
        );
        let mut want = json!({"cache_read": null, "cache_write": null});
        want.as_object_mut().unwrap().extend(usage.as_object().unwrap().clone());
        assert_eq!(got, Some(want), "{at}: usage");
    }
}

#[test]
fn golden_files() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "golden files missing from {dir}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let lower = text.to_ascii_lowercase();
        for marker in SECRET_MARKERS {
            assert!(
                !lower.contains(marker),
                "{path:?} holds a secret-looking string ({marker})"
            );
        }
        let golden: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let raw: RawGolden = serde_json::from_str(&text).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (index, exchange) in golden["exchanges"].as_array().unwrap().iter().enumerate() {
            run_exchange(&name, index, exchange, &raw.exchanges[index]);
        }
    }
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
