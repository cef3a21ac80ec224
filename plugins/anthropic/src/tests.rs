//! Golden tests (`tests/golden/*.json`, run by the SDK's `golden` module,
//! whose docs give the format) plus a few cases easier to state in code.

use serde_json::{Value, json};
use tollgate_plugin_sdk::golden::Goldens;
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event};

use crate::Anthropic;

/// Headers that carry credentials: the host sets them, never the adapter.
const SECRET_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

#[test]
fn golden_files() {
    Goldens {
        dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"),
        secret_headers: &SECRET_HEADERS,
        secret_markers: &["test-key", "sk-"],
    }
    .check::<Anthropic>();
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

fn native(ctx: CallContext, body: Value) -> Anthropic {
    Anthropic::new_native(ctx, "anthropic-messages".into(), body.to_string().into_bytes()).unwrap()
}

#[test]
fn native_requests_keep_the_callers_fields_and_set_model_stream_and_limit() {
    assert_eq!(Anthropic::native_dialects(), ["anthropic-messages"]);
    let body = json!({
        "model": "anthropic/claude", "max_tokens": 2048, "stream": false,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}}]}],
    });
    let request = native(ctx(true), body.clone()).request().unwrap();
    assert_eq!(request.url, "https://api.anthropic.com/v1/messages");
    assert_eq!(request.auth, AuthSlot::Header("x-api-key".into()));
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    let mut expected = body.clone();
    expected["model"] = json!("claude-sonnet-4-5");
    expected["stream"] = json!(true);
    assert_eq!(sent, expected);

    let mut no_limit = body.clone();
    no_limit.as_object_mut().unwrap().remove("max_tokens");
    let mut capped = ctx(false);
    capped.max_output_tokens = Some(300);
    let sent: Value = serde_json::from_slice(&native(capped, no_limit).request().unwrap().body).unwrap();
    assert_eq!(sent["max_tokens"], 300);
    assert!(sent.get("stream").is_none());

    let refused = Anthropic::new_native(ctx(false), "openai-responses".into(), b"{}".to_vec());
    assert_eq!(refused.err().unwrap().class, ErrorClass::InvalidRequest);
}

#[test]
fn native_answers_pass_unchanged_and_report_usage() {
    let mut whole = native(ctx(false), json!({"messages": []}));
    let answer = json!({"type": "message", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}],
                        "usage": {"input_tokens": 3, "output_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 1}});
    let head = tollgate_plugin_sdk::ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let bytes = answer.to_string().into_bytes();
    assert_eq!(whole.response(head, bytes.clone()).unwrap(), bytes);
    let usage = whole.usage().unwrap();
    assert_eq!(
        (usage.input, usage.output, usage.cache_read, usage.cache_write),
        (11, 5, Some(7), Some(1))
    );

    let mut streamed = native(ctx(true), json!({"messages": []}));
    let event = |name: &str, data: Value| Event {
        name: Some(name.into()),
        data: data.to_string().into_bytes(),
    };
    let events = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 4, "output_tokens": 1}}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
        ),
    ];
    assert_eq!(streamed.native_events(events.clone()).unwrap(), events);
    let empty = Event {
        name: None,
        data: b" \n".to_vec(),
    };
    assert_eq!(
        streamed.native_events(vec![empty]).unwrap(),
        Vec::new(),
        "nothing to relay"
    );
    assert!(streamed.native_finish().is_err(), "no message_stop yet: cut short");
    streamed
        .native_events(vec![event("message_stop", json!({"type": "message_stop"}))])
        .unwrap();
    assert_eq!(streamed.native_finish().unwrap(), Vec::new());
    let usage = streamed.usage().unwrap();
    assert_eq!((usage.input, usage.output), (4, 9));

    let mut failing = native(ctx(true), json!({"messages": []}));
    let error = event(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
    );
    assert_eq!(
        failing.native_events(vec![error]).unwrap_err().class,
        ErrorClass::Overloaded
    );
}
