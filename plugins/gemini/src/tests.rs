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

use serde_json::{Value, json};
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event, ResponseHead};

use crate::Gemini;

/// Headers that carry credentials: the host sets them, never the adapter.
const SECRET_HEADERS: [&str; 3] = ["authorization", "x-goog-api-key", "api-key"];

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
    let mut adapter = Gemini::new(
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
            .map(|data| Event {
                name: None,
                data: data.as_str().unwrap().as_bytes().to_vec(),
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
        // Google API keys start with "AIza"; the suite's test key is "test-key".
        assert!(
            !lower.contains("test-key") && !lower.contains("sk-") && !lower.contains("aiza"),
            "{path:?} holds a secret"
        );
        let golden: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (index, exchange) in golden["exchanges"].as_array().unwrap().iter().enumerate() {
            run_exchange(&name, index, exchange);
        }
    }
}

fn ctx(model: &str, base_url: &str, stream: bool) -> CallContext {
    CallContext {
        request_id: "r1".into(),
        upstream_model: model.into(),
        base_url: base_url.into(),
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
    let request = Gemini::new(ctx, body(request)).request()?;
    Ok(serde_json::from_slice(&request.body).unwrap())
}

#[test]
fn urls_keep_collections_and_queries() {
    let plain = json!({"model": "gemini/x", "messages": [{"role": "user", "content": "hi"}]});
    let cases = [
        (
            "gemini-2.5-flash",
            "https://g.example/v1beta",
            false,
            "https://g.example/v1beta/models/gemini-2.5-flash:generateContent",
        ),
        (
            "models/gemini-2.5-flash",
            "https://g.example/v1beta/",
            true,
            "https://g.example/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        ),
        (
            "tunedModels/my-tune",
            "https://g.example/v1beta",
            false,
            "https://g.example/v1beta/tunedModels/my-tune:generateContent",
        ),
        (
            "gemini-2.0-flash",
            "http://127.0.0.1:9/v1beta?x=1",
            true,
            "http://127.0.0.1:9/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse&x=1",
        ),
    ];
    for (model, base, stream, url) in cases {
        let request = Gemini::new(ctx(model, base, stream), body(plain.clone()))
            .request()
            .unwrap();
        assert_eq!(request.url, url, "{model} {base}");
        assert_eq!(request.auth, AuthSlot::Header("x-goog-api-key".into()));
    }
    for bad in ["", "a/b", "models/", "x?y", "gem ini", "../admin", "models/a:b"] {
        let error = Gemini::new(ctx(bad, "https://g.example/v1beta", false), body(plain.clone()))
            .request()
            .unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{bad}");
    }
}

#[test]
fn continuation_is_a_trailing_model_turn_and_the_cap_applies() {
    let mut context = ctx("gemini-2.5-flash", "https://g.example/v1beta", true);
    context.continuation = Some("You said:".into());
    context.max_output_tokens = Some(64);
    let out = sent(
        context,
        json!({"messages": [{"role": "user", "content": "hi"}], "models": ["a/b"]}),
    )
    .unwrap();
    assert_eq!(
        out,
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"text": "You said:"}]}
            ],
            "generationConfig": {"maxOutputTokens": 64}
        })
    );
}

#[test]
fn tool_choice_modes() {
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}]);
    let cases = [
        (json!("auto"), json!({"mode": "AUTO"})),
        (json!("none"), json!({"mode": "NONE"})),
        (json!("required"), json!({"mode": "ANY"})),
        (
            json!({"type": "function", "function": {"name": "f"}}),
            json!({"mode": "ANY", "allowedFunctionNames": ["f"]}),
        ),
    ];
    for (choice, expected) in cases {
        let out = sent(
            ctx("m", "https://g.example/v1beta", false),
            json!({"messages": [{"role": "user", "content": "x"}], "tools": tools, "tool_choice": choice}),
        )
        .unwrap();
        assert_eq!(out["toolConfig"]["functionCallingConfig"], expected);
    }
    let error = sent(
        ctx("m", "https://g.example/v1beta", false),
        json!({"messages": [{"role": "user", "content": "x"}], "tools": tools, "tool_choice": "sometimes"}),
    )
    .unwrap_err();
    assert_eq!(error.class, ErrorClass::InvalidRequest);
}

#[test]
fn tool_results_need_a_known_call_and_share_a_turn() {
    let messages = json!([
        {"role": "user", "content": "both"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "a", "arguments": "{\"x\":1}"}},
            {"id": "call_1", "type": "function", "function": {"name": "b", "arguments": ""}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"ok\": true}"},
        {"role": "tool", "tool_call_id": "call_0", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": "thanks"}
    ]);
    let out = sent(
        ctx("m", "https://g.example/v1beta", false),
        json!({"messages": messages}),
    )
    .unwrap();
    assert_eq!(
        out["contents"],
        json!([
            {"role": "user", "parts": [{"text": "both"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "a", "args": {"x": 1}}},
                {"functionCall": {"name": "b", "args": {}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "b", "response": {"ok": true}}},
                {"functionResponse": {"name": "a", "response": {"output": "done"}}}
            ]},
            {"role": "user", "parts": [{"text": "thanks"}]}
        ])
    );
    let orphan = json!([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "y"}]);
    let error = sent(ctx("m", "https://g.example/v1beta", false), json!({"messages": orphan})).unwrap_err();
    assert_eq!(error.class, ErrorClass::InvalidRequest);
    assert!(error.message.contains("nope"), "{}", error.message);
}

#[test]
fn refuses_what_gemini_cannot_do() {
    let base = |extra: Value| {
        let mut request = json!({"messages": [{"role": "user", "content": "x"}]});
        request
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        sent(ctx("m", "https://g.example/v1beta", false), request)
    };
    for extra in [
        json!({"n": 2}),
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}),
        json!({"tools": [{"type": "web_search"}]}),
        json!({"stop": 5}),
        json!({"temperature": "hot"}),
        json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}]}]}),
        json!({"messages": [{"role": "wizard", "content": "x"}]}),
        json!({"messages": [{"role": "system", "content": "only a system prompt"}]}),
    ] {
        let error = base(extra.clone()).unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{extra}");
    }
}

#[test]
fn stream_cut_before_finish_is_an_upstream_failure() {
    let mut adapter = Gemini::new(
        ctx("m", "https://g.example/v1beta", true),
        body(json!({"messages": []})),
    );
    let event = Event {
        name: None,
        data: br#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}],"responseId":"r"}"#.to_vec(),
    };
    let chunks = adapter.on_events(vec![event]).unwrap();
    assert_eq!(chunks.len(), 1);
    let error = adapter.finish().unwrap_err();
    assert_eq!(error.class, ErrorClass::Upstream(502));
}
