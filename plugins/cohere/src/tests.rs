//! Golden tests (`tests/golden/*.json`, run by the SDK's `golden` module,
//! whose docs give the format) plus a few cases easier to state in code.

use serde_json::{Value, json};
use tollgate_plugin_sdk::golden::Goldens;
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event};

use crate::Cohere;

/// Headers that carry credentials: the host sets them, never the adapter.
const SECRET_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

#[test]
fn golden_files() {
    Goldens {
        dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"),
        secret_headers: &SECRET_HEADERS,
        secret_markers: &["test-key", "sk-", "bearer "],
    }
    .check::<Cohere>();
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

#[test]
fn embeddings_go_to_embed_and_come_back_in_openais_shape() {
    use tollgate_plugin_sdk::{Adapter, Operation, OperationBody, ResponseHead};
    let ctx = tollgate_plugin_sdk::CallContext {
        request_id: "r".into(),
        upstream_model: "embed-v4.0".into(),
        base_url: "https://api.cohere.com".into(),
        stream: false,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    };
    let body =
        OperationBody::Json(br#"{"model":"cohere/embed-v4.0","input":["a","b"],"encoding_format":"base64"}"#.to_vec());
    let mut exchange = crate::Cohere::new_operation(ctx, Operation::Embeddings, body).unwrap();
    let request = exchange.request().unwrap();
    assert_eq!(request.url, "https://api.cohere.com/v2/embed");
    let sent: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(sent["texts"], serde_json::json!(["a", "b"]));
    assert_eq!(sent["model"], "embed-v4.0");
    let head = ResponseHead {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
    };
    let answer =
        br#"{"id":"x","embeddings":{"float":[[1.0,0.0],[0.0,1.0]]},"meta":{"billed_units":{"input_tokens":2}}}"#;
    let translated = exchange.operation_response(head, answer.to_vec()).unwrap();
    let object: serde_json::Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(object["data"][1]["index"], 1);
    // 1.0f32, 0.0f32 little-endian, base64.
    assert_eq!(object["data"][0]["embedding"], "AACAPwAAAAA=");
    assert_eq!(exchange.measured().unwrap().input_tokens, Some(2));
}
