//! Golden tests (`tests/golden/*.json`, run by the SDK's `golden` module,
//! whose docs give the format) plus a few cases easier to state in code.

use serde_json::{Value, json};
use tollgate_plugin_sdk::golden::Goldens;
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event};

use crate::Gemini;

/// Headers that carry credentials: the host sets them, never the adapter.
const SECRET_HEADERS: [&str; 3] = ["authorization", "x-goog-api-key", "api-key"];

#[test]
fn golden_files() {
    Goldens {
        dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"),
        secret_headers: &SECRET_HEADERS,
        secret_markers: &["test-key", "sk-", "aiza"],
    }
    .check::<Gemini>();
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
