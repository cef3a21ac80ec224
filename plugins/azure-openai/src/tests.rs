//! Golden tests (`tests/golden/*.json`) plus a few cases easier to state in code.
//!
//! A golden file holds `exchanges`, each: the call `context`, the caller's
//! OpenAI `request`, the `upstream_request` the adapter must build (method,
//! URL, headers, auth slot, body), then either an upstream `response` and the
//! OpenAI `expected_response`, an upstream `stream` (SSE data payloads) and the
//! `expected_chunks` (including those `finish` returns), or an upstream `error`
//! and the `expected_error` class and message; `expected_usage` when usage is
//! reported.

use serde_json::{Value, json};
use tollgate_plugin_sdk::{Adapter, AuthSlot, CallContext, ErrorClass, Event, ResponseHead};

use crate::AzureOpenAi;

const SECRET_HEADERS: [&str; 3] = ["authorization", "api-key", "ocp-apim-subscription-key"];

fn context(spec: &Value) -> CallContext {
    CallContext {
        request_id: "req-golden".into(),
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
        AuthSlot::AwsSigv4(_) => "aws-sigv4".into(),
    }
}

fn class_name(class: &ErrorClass) -> String {
    class.to_string()
}

fn run_exchange(file: &str, index: usize, exchange: &Value) {
    let at = format!("{file} exchange {index}");
    let mut adapter = AzureOpenAi::new(
        context(&exchange["context"]),
        exchange["request"].to_string().into_bytes(),
    );
    let request = adapter
        .request()
        .unwrap_or_else(|e| panic!("{at}: request failed: {e:?}"));
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

    if let Some(body) = exchange.get("response") {
        let out = adapter
            .response(head(200, &Value::Null), body.to_string().into_bytes())
            .unwrap_or_else(|e| panic!("{at}: response failed: {e:?}"));
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out, exchange["expected_response"], "{at}: response");
    }
    if let Some(stream) = exchange.get("stream") {
        let events = stream
            .as_array()
            .unwrap()
            .iter()
            .map(|data| Event {
                name: None,
                data: data.as_str().unwrap().as_bytes().to_vec(),
            })
            .collect();
        let mut chunks = adapter.on_events(events).unwrap();
        chunks.extend(adapter.finish().unwrap());
        let chunks: Vec<Value> = chunks.iter().map(|c| serde_json::from_slice(c).unwrap()).collect();
        assert_eq!(Value::from(chunks), exchange["expected_chunks"], "{at}: chunks");
    }
    if let Some(error) = exchange.get("error") {
        let status = error["status"].as_u64().unwrap() as u16;
        let classified =
            adapter.classify_error(head(status, &error["headers"]), error["body"].to_string().into_bytes());
        let actual = json!({"class": class_name(&classified.class), "message": classified.message});
        assert_eq!(actual, exchange["expected_error"], "{at}: error");
    }
    if let Some(usage) = exchange.get("expected_usage") {
        let got = adapter.usage().map(|u| json!({"input": u.input, "output": u.output}));
        assert_eq!(got.as_ref(), Some(usage), "{at}: usage");
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
        assert!(
            !lower.contains("test-key") && !lower.contains("sk-"),
            "{path:?} holds a secret"
        );
        let golden: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (index, exchange) in golden["exchanges"].as_array().unwrap().iter().enumerate() {
            run_exchange(&name, index, exchange);
        }
    }
}

fn adapter(base_url: &str, deployment: &str) -> AzureOpenAi {
    let ctx = CallContext {
        request_id: "r".into(),
        upstream_model: deployment.into(),
        base_url: base_url.into(),
        stream: false,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    };
    AzureOpenAi::new(ctx, br#"{"model":"azure-openai/x","messages":[]}"#.to_vec())
}

#[test]
fn api_version_comes_from_base_url_or_the_default() {
    let cases = [
        (
            "https://res.openai.azure.com",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
        ),
        (
            "https://res.openai.azure.com/openai/",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
        ),
        (
            "https://res.openai.azure.com/?api-version=2025-01-01-preview",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2025-01-01-preview",
        ),
        (
            "http://127.0.0.1:9/openai?foo=1&api-version=2024-06-01",
            "http://127.0.0.1:9/openai/deployments/gpt4o/chat/completions?foo=1&api-version=2024-06-01",
        ),
    ];
    for (base, url) in cases {
        assert_eq!(adapter(base, "gpt4o").request().unwrap().url, url, "{base}");
    }
}

#[test]
fn rejects_deployment_names_that_would_change_the_url() {
    for bad in ["", "a/b", "x?y", "dep loy", "../admin"] {
        let error = adapter("https://r.openai.azure.com", bad).request().unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{bad}");
    }
}

#[test]
fn continuation_becomes_a_trailing_assistant_turn() {
    let ctx = CallContext {
        request_id: "r".into(),
        upstream_model: "dep".into(),
        base_url: "https://r.openai.azure.com".into(),
        stream: true,
        attempt: 1,
        max_output_tokens: Some(64),
        continuation: Some("Hello".into()),
    };
    let body = json!({"model": "azure-openai/dep", "messages": [{"role": "user", "content": "hi"}]});
    let request = AzureOpenAi::new(ctx, body.to_string().into_bytes()).request().unwrap();
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        sent,
        json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}],
               "max_tokens": 64, "stream": true, "stream_options": {"include_usage": true}})
    );
}
