//! Golden tests (`tests/golden/*.json`) plus a few cases easier to state in code.
//!
//! A golden file holds `exchanges`, each: the call `context`, the caller's
//! OpenAI `request`, the `upstream_request` the adapter must build (method,
//! URL, headers, auth slot, body) or the `expected_request_error`, then either
//! an upstream `response` (with optional `response_headers`) and the OpenAI
//! `expected_response`, an upstream `stream` (SSE data payloads) and the
//! `expected_chunks` (including those `finish` returns) or `expected_stream_error`,
//! or an upstream `error` and the `expected_error` class and message;
//! `expected_usage` when usage is reported.
//!
//! `TOLLGATE_BLESS=1 cargo test -p tollgate-plugin-anthropic golden` rewrites
//! the expected parts from what the adapter does now, for review in the diff.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event, ResponseHead};

use crate::Anthropic;

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

/// What the adapter does with one exchange's inputs: the exchange with every
/// `expected_*` / `upstream_request` field filled in from the adapter.
fn run_exchange(exchange: &Value) -> Value {
    let mut actual: Map<String, Value> = exchange
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.starts_with("expected_") && *k != "upstream_request")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut adapter = Anthropic::new(
        context(&exchange["context"]),
        exchange["request"].to_string().into_bytes(),
    );
    let request = match adapter.request() {
        Ok(request) => request,
        Err(error) => {
            actual.insert("expected_request_error".into(), error_json(&error));
            return Value::Object(actual);
        }
    };
    let headers: Map<String, Value> = request
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    for secret in SECRET_HEADERS {
        assert!(!headers.contains_key(secret), "adapter set secret header {secret}");
    }
    actual.insert(
        "upstream_request".into(),
        json!({
            "method": request.method,
            "url": request.url,
            "headers": headers,
            "auth": auth_name(&request.auth),
            "body": serde_json::from_slice::<Value>(&request.body).unwrap(),
        }),
    );
    if let Some(body) = exchange.get("response") {
        let out = adapter
            .response(head(200, &exchange["response_headers"]), body.to_string().into_bytes())
            .map(|out| serde_json::from_slice::<Value>(&out).unwrap());
        match out {
            Ok(out) => actual.insert("expected_response".into(), out),
            Err(error) => actual.insert("expected_response_error".into(), error_json(&error)),
        };
    }
    if let Some(stream) = exchange.get("stream") {
        let events = stream
            .as_array()
            .unwrap()
            .iter()
            .map(|data| Event {
                name: None,
                data: data.to_string().into_bytes(),
            })
            .collect();
        let result = adapter.on_events(events).and_then(|mut chunks| {
            chunks.extend(adapter.finish()?);
            Ok(chunks)
        });
        match result {
            Ok(chunks) => {
                let chunks: Vec<Value> = chunks.iter().map(|c| serde_json::from_slice(c).unwrap()).collect();
                actual.insert("expected_chunks".into(), Value::from(chunks))
            }
            Err(error) => actual.insert("expected_stream_error".into(), error_json(&error)),
        };
    }
    if let Some(error) = exchange.get("error") {
        let status = error["status"].as_u64().unwrap() as u16;
        let classified =
            adapter.classify_error(head(status, &error["headers"]), error["body"].to_string().into_bytes());
        actual.insert("expected_error".into(), error_json(&classified));
    }
    if let Some(u) = adapter.usage() {
        actual.insert(
            "expected_usage".into(),
            json!({"input": u.input, "output": u.output, "cache_read": u.cache_read, "cache_write": u.cache_write}),
        );
    }
    Value::Object(actual)
}

#[test]
fn golden_files() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    let bless = std::env::var_os("TOLLGATE_BLESS").is_some();
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
        // Anthropic keys start with "sk-ant-"; the suite's test key is "test-key".
        assert!(
            !lower.contains("test-key") && !lower.contains("sk-"),
            "{path:?} holds a secret"
        );
        let golden: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let exchanges = golden["exchanges"].as_array().unwrap();
        let actual: Vec<Value> = exchanges.iter().map(run_exchange).collect();
        if bless {
            let out = serde_json::to_string_pretty(&json!({ "exchanges": actual })).unwrap();
            std::fs::write(&path, out + "\n").unwrap();
            continue;
        }
        for (index, (expected, actual)) in exchanges.iter().zip(&actual).enumerate() {
            assert_eq!(actual, expected, "{name} exchange {index}");
        }
    }
}

fn ctx(stream: bool) -> CallContext {
    CallContext {
        request_id: "r1".into(),
        upstream_model: "claude-sonnet-4-5".into(),
        base_url: "https://api.anthropic.com".into(),
        stream,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    }
}

fn sent(ctx: CallContext, request: Value) -> Result<Value, AdapterError> {
    let request = Anthropic::new(ctx, request.to_string().into_bytes()).request()?;
    Ok(serde_json::from_slice(&request.body).unwrap())
}

#[test]
fn url_headers_and_auth_slot() {
    let mut context = ctx(false);
    context.base_url = "http://127.0.0.1:9/".into();
    let request = Anthropic::new(context, br#"{"messages":[{"role":"user","content":"hi"}]}"#.to_vec())
        .request()
        .unwrap();
    assert_eq!(request.url, "http://127.0.0.1:9/v1/messages");
    assert_eq!(request.auth, AuthSlot::Header("x-api-key".into()));
    assert!(
        request
            .headers
            .contains(&("anthropic-version".into(), "2023-06-01".into()))
    );
}

#[test]
fn max_tokens_comes_from_the_caller_then_the_gateway_then_the_default() {
    let messages = json!([{"role": "user", "content": "hi"}]);
    let out = sent(
        ctx(false),
        json!({"messages": messages, "max_completion_tokens": 7, "max_tokens": 9}),
    )
    .unwrap();
    assert_eq!(out["max_tokens"], 7);
    let out = sent(ctx(false), json!({"messages": messages, "max_tokens": 9})).unwrap();
    assert_eq!(out["max_tokens"], 9);
    let mut capped = ctx(false);
    capped.max_output_tokens = Some(64);
    assert_eq!(sent(capped, json!({"messages": messages})).unwrap()["max_tokens"], 64);
    assert_eq!(
        sent(ctx(false), json!({"messages": messages})).unwrap()["max_tokens"],
        4096
    );
}

#[test]
fn continuation_is_a_trailing_assistant_turn_without_trailing_space() {
    let mut context = ctx(true);
    context.continuation = Some("You said: ".into());
    let shape_body = json!({"messages": [{"role": "user", "content": "hi there"}]});
    let mut adapter = Anthropic::new(context, shape_body.to_string().into_bytes());
    let request = adapter.request().unwrap();
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "hi there"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "You said:"}]}
        ])
    );
    // The model repeats the cut space; the caller already has it.
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " hi"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there"}}),
    ];
    let chunks = adapter
        .on_events(
            events
                .iter()
                .map(|e| Event {
                    name: None,
                    data: e.to_string().into_bytes(),
                })
                .collect(),
        )
        .unwrap();
    let text: String = chunks
        .iter()
        .map(|c| serde_json::from_slice::<Value>(c).unwrap())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "hi there");
}

#[test]
fn consecutive_turns_merge_and_tool_results_lead() {
    let messages = json!([
        {"role": "system", "content": "A"},
        {"role": "developer", "content": [{"type": "text", "text": "B"}]},
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
            {"id": "toolu_2", "type": "function", "function": {"name": "g", "arguments": ""}}
        ]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "r1"},
        {"role": "user", "content": "and?"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "r2"}]}
    ]);
    let out = sent(ctx(false), json!({"messages": messages})).unwrap();
    assert_eq!(out["system"], "A\n\nB");
    assert_eq!(
        out["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r1"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "r2"},
                {"type": "text", "text": "and?"}
            ]}
        ])
    );
}

#[test]
fn tool_choice_modes_and_serial_calls() {
    let tools =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]);
    let cases = [
        (json!("auto"), None, json!({"type": "auto"})),
        (json!("none"), Some(false), json!({"type": "none"})),
        (
            json!("required"),
            Some(false),
            json!({"type": "any", "disable_parallel_tool_use": true}),
        ),
        (
            json!({"type": "function", "function": {"name": "f"}}),
            None,
            json!({"type": "tool", "name": "f"}),
        ),
        (
            Value::Null,
            Some(false),
            json!({"type": "auto", "disable_parallel_tool_use": true}),
        ),
    ];
    for (choice, parallel, expected) in cases {
        let mut request =
            json!({"messages": [{"role": "user", "content": "x"}], "tools": tools, "tool_choice": choice});
        if let Some(parallel) = parallel {
            request["parallel_tool_calls"] = Value::Bool(parallel);
        }
        let out = sent(ctx(false), request).unwrap();
        assert_eq!(out["tool_choice"], expected, "{choice}");
    }
    let out = sent(
        ctx(false),
        json!({"messages": [{"role": "user", "content": "x"}], "tools": tools}),
    )
    .unwrap();
    assert!(out.get("tool_choice").is_none());
}

#[test]
fn refuses_what_anthropic_cannot_do() {
    let base = |extra: Value| {
        let mut request = json!({"messages": [{"role": "user", "content": "x"}]});
        request
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        sent(ctx(false), request)
    };
    let tools = json!([{"type": "function", "function": {"name": "f"}}]);
    for extra in [
        json!({"n": 2}),
        json!({"logprobs": true}),
        json!({"presence_penalty": 0.5}),
        json!({"reasoning_effort": "high"}),
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}),
        json!({"response_format": {"type": "json_object"}, "tools": tools}),
        json!({"tools": [{"type": "web_search"}]}),
        json!({"stop": ["  "]}),
        json!({"temperature": "hot"}),
        json!({"max_tokens": 0}),
        json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/tiff;base64,AAAA"}}]}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}]}]}),
        json!({"messages": [{"role": "wizard", "content": "x"}]}),
        json!({"messages": [{"role": "system", "content": "only a system prompt"}]}),
        json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "y"}]}),
    ] {
        let error = base(extra.clone()).unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{extra}");
    }
}

#[test]
fn stream_cut_before_message_stop_is_an_upstream_failure() {
    let mut adapter = Anthropic::new(ctx(true), br#"{"messages":[{"role":"user","content":"x"}]}"#.to_vec());
    adapter.request().unwrap();
    let event = Event {
        name: Some("message_start".into()),
        data: br#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":2,"output_tokens":1}}}"#.to_vec(),
    };
    assert_eq!(adapter.on_events(vec![event]).unwrap().len(), 1);
    let error = adapter.finish().unwrap_err();
    assert_eq!(error.class, ErrorClass::Upstream(502));
}
