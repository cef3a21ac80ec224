//! Golden tests (`tests/golden/*.json`) plus a few cases easier to state in code.
//!
//! A golden file holds `exchanges`, each: the call `context`, the caller's
//! OpenAI `request`, the `upstream_request` the adapter must build (method,
//! URL, headers, auth slot, body) or the `expected_request_error`, then either
//! an upstream `response` (with optional `response_headers`) and the OpenAI
//! `expected_response`, an upstream `stream` (SSE data payloads, bare or as `{event, data}`) and the
//! `expected_chunks` (including those `finish` returns) or `expected_stream_error`,
//! or an upstream `error` and the `expected_error` class and message;
//! `expected_usage` when usage is reported.

use serde_json::{Value, json};
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event, ResponseHead};

use crate::Cohere;

/// Headers that carry credentials: the host sets them, never the adapter.
const SECRET_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

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

fn error_json(error: &AdapterError) -> Value {
    json!({"class": error.class.to_string(), "message": error.message})
}

fn run_exchange(file: &str, index: usize, exchange: &Value) {
    let at = format!("{file} exchange {index}");
    let mut adapter = Cohere::new(
        context(&exchange["context"]),
        exchange["request"].to_string().into_bytes(),
    );
    let request = match adapter.request() {
        Ok(request) => request,
        Err(error) => {
            assert_eq!(
                Some(&error_json(&error)),
                exchange.get("expected_request_error"),
                "{at}: request"
            );
            return;
        }
    };
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
            .response(head(200, &exchange["response_headers"]), body.to_string().into_bytes())
            .map(|out| serde_json::from_slice::<Value>(&out).unwrap());
        match out {
            Ok(out) => assert_eq!(out, exchange["expected_response"], "{at}: response"),
            Err(error) => assert_eq!(
                error_json(&error),
                exchange["expected_response_error"],
                "{at}: response"
            ),
        }
    }
    if let Some(stream) = exchange.get("stream") {
        let events = stream
            .as_array()
            .unwrap()
            .iter()
            .map(|item| match item {
                // `{"event": name, "data": payload}`, or the bare payload.
                Value::Object(framed) => Event {
                    name: framed["event"].as_str().map(str::to_owned),
                    data: framed["data"].as_str().unwrap().as_bytes().to_vec(),
                },
                data => Event {
                    name: None,
                    data: data.as_str().unwrap().as_bytes().to_vec(),
                },
            })
            .collect();
        let result = adapter.on_events(events).and_then(|mut chunks| {
            chunks.extend(adapter.finish()?);
            Ok(chunks)
        });
        match result {
            Ok(chunks) => {
                let chunks: Vec<Value> = chunks.iter().map(|c| serde_json::from_slice(c).unwrap()).collect();
                assert_eq!(Value::from(chunks), exchange["expected_chunks"], "{at}: chunks");
            }
            Err(error) => assert_eq!(error_json(&error), exchange["expected_stream_error"], "{at}: stream"),
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
            |u| json!({"input": u.input, "output": u.output, "cache_read": u.cache_read, "reasoning": u.reasoning}),
        );
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
        // The suite's test key is "test-key"; no bearer token belongs in a golden.
        assert!(
            !lower.contains("test-key") && !lower.contains("sk-") && !lower.contains("bearer "),
            "{path:?} holds a secret"
        );
        let golden: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (index, exchange) in golden["exchanges"].as_array().unwrap().iter().enumerate() {
            run_exchange(&name, index, exchange);
        }
    }
}

fn ctx(stream: bool) -> CallContext {
    CallContext {
        request_id: "r1".into(),
        upstream_model: "command-a-03-2025".into(),
        base_url: "https://api.cohere.com".into(),
        stream,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    }
}

fn body(value: Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

fn sent(ctx: CallContext, request: Value) -> Result<Value, AdapterError> {
    let request = Cohere::new(ctx, body(request)).request()?;
    Ok(serde_json::from_slice(&request.body).unwrap())
}

fn with(extra: Value) -> Value {
    let mut request = json!({"messages": [{"role": "user", "content": "x"}]});
    request
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    request
}

#[test]
fn url_and_bearer_auth() {
    for base in [
        "https://api.cohere.com",
        "https://api.cohere.com/",
        "http://127.0.0.1:9",
    ] {
        let mut context = ctx(false);
        context.base_url = base.into();
        let request = Cohere::new(context, body(with(json!({})))).request().unwrap();
        assert_eq!(request.url, format!("{}/v2/chat", base.trim_end_matches('/')));
        assert_eq!(request.auth, AuthSlot::Bearer);
    }
}

#[test]
fn continuation_is_a_trailing_assistant_turn_and_the_cap_applies() {
    let mut context = ctx(true);
    context.continuation = Some("You said:".into());
    context.max_output_tokens = Some(64);
    let out = sent(context, with(json!({"models": ["a/b"]}))).unwrap();
    assert_eq!(
        out,
        json!({
            "model": "command-a-03-2025",
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": "You said:"}
            ],
            "max_tokens": 64,
            "stream": true
        })
    );
}

#[test]
fn tool_choice_modes() {
    let tool = |name: &str| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}});
    let tools = json!([tool("f"), tool("g")]);
    let cases = [
        (json!("auto"), None, vec!["f", "g"]),
        (json!("none"), Some("NONE"), vec!["f", "g"]),
        (json!("required"), Some("REQUIRED"), vec!["f", "g"]),
        // Named choice: emulated by offering only that tool, required.
        (
            json!({"type": "function", "function": {"name": "g"}}),
            Some("REQUIRED"),
            vec!["g"],
        ),
    ];
    for (choice, expected, names) in cases {
        let out = sent(ctx(false), with(json!({"tools": tools, "tool_choice": choice}))).unwrap();
        assert_eq!(out.get("tool_choice").and_then(Value::as_str), expected, "{choice}");
        let offered: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(offered, names, "{choice}");
    }
    for bad in [
        json!("sometimes"),
        json!({"type": "function", "function": {"name": "h"}}),
        json!(3),
    ] {
        let error = sent(ctx(false), with(json!({"tools": tools, "tool_choice": bad}))).unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{bad}");
    }
}

#[test]
fn tool_results_need_a_known_call() {
    let orphan = json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "y"}]});
    let error = sent(ctx(false), orphan).unwrap_err();
    assert_eq!(error.class, ErrorClass::InvalidRequest);
    assert!(error.message.contains("nope"), "{}", error.message);
}

#[test]
fn refuses_what_cohere_cannot_do() {
    for extra in [
        json!({"n": 2}),
        json!({"logprobs": true}),
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}),
        json!({"response_format": {"type": "xml"}}),
        json!({"tools": [{"type": "web_search"}]}),
        json!({"stop": ["a", "b", "c", "d", "e", "f"]}),
        json!({"stop": 5}),
        json!({"temperature": "hot"}),
        json!({"max_tokens": 0}),
        json!({"presence_penalty": -0.5}),
        json!({"frequency_penalty": 1.5}),
        json!({"reasoning_effort": "extreme"}),
        json!({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}]}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}]}]}),
        json!({"messages": [{"role": "function", "name": "f", "content": "x"}]}),
        json!({"messages": [{"role": "system", "content": "only a system prompt"}]}),
        json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]}),
    ] {
        let error = sent(ctx(false), with(extra.clone())).unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{extra}");
    }
}

#[test]
fn stream_cut_before_message_end_is_an_upstream_failure() {
    let mut adapter = Cohere::new(ctx(true), body(with(json!({}))));
    let events = vec![
        Event {
            name: Some("message-start".into()),
            data: br#"{"id":"m1","type":"message-start","delta":{"message":{"role":"assistant"}}}"#.to_vec(),
        },
        // The type may come only from the SSE event name.
        Event {
            name: Some("content-delta".into()),
            data: br#"{"index":0,"delta":{"message":{"content":{"text":"Hel"}}}}"#.to_vec(),
        },
    ];
    let chunks = adapter.on_events(events).unwrap();
    assert_eq!(chunks.len(), 2);
    let second: Value = serde_json::from_slice(&chunks[1]).unwrap();
    assert_eq!(second["choices"][0]["delta"], json!({"content": "Hel"}));
    assert_eq!(second["id"], "chatcmpl-m1");
    let error = adapter.finish().unwrap_err();
    assert_eq!(error.class, ErrorClass::Upstream(502));
}

#[test]
fn top_p_is_kept_within_cohere_s_range() {
    for (top_p, p) in [(1.0, 0.99), (0.0, 0.01), (0.5, 0.5)] {
        let out = sent(ctx(false), with(json!({"top_p": top_p}))).unwrap();
        assert_eq!(out["p"], json!(p), "{top_p}");
    }
}
