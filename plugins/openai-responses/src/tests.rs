//! The translation in both directions, whole and streamed, against the
//! Responses API's documented shapes.

use serde_json::{Value, json};
use tollgate_plugin_sdk::{Adapter, AuthSlot, CallContext, ErrorClass, Event, ResponseHead, Usage};

use crate::OpenAiResponses;

fn ctx(stream: bool) -> CallContext {
    CallContext {
        request_id: "r1".into(),
        upstream_model: "gpt-5-pro".into(),
        base_url: "https://api.example/v1/".into(),
        stream,
        attempt: 0,
        max_output_tokens: Some(4096),
        continuation: None,
    }
}

fn exchange(stream: bool, request: Value) -> OpenAiResponses {
    OpenAiResponses::new(ctx(stream), request.to_string().into_bytes())
}

fn head() -> ResponseHead {
    ResponseHead {
        status: 200,
        headers: vec![],
    }
}

#[test]
fn a_chat_request_becomes_input_items() {
    let request = json!({
        "model": "openai/gpt-5-pro",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://img.example/a.png", "detail": "low"}},
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"at\":\"a\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        ],
        "tools": [{"type": "function", "function": {"name": "look", "description": "Looks", "parameters": {"type": "object", "properties": {"at": {"type": "string"}}}}}],
        "tool_choice": {"type": "function", "function": {"name": "look"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true, "schema": {"type": "object"}}},
        "reasoning_effort": "high",
        "max_completion_tokens": 300,
        "temperature": 0.5,
        "prompt_cache_key": "conv-1",
    });
    let mut exchange = exchange(true, request);
    let sent = exchange.request().unwrap();
    assert_eq!(sent.url, "https://api.example/v1/responses");
    assert_eq!(sent.auth, AuthSlot::Bearer);
    assert!(sent.headers.iter().all(|(name, _)| name != "authorization"));
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "gpt-5-pro",
            "input": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": "https://img.example/a.png", "detail": "low"},
                ]},
                {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{\"at\":\"a\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a cat"},
            ],
            "stream": true,
            "store": false,
            "max_output_tokens": 300,
            "temperature": 0.5,
            "prompt_cache_key": "conv-1",
            "tools": [{"type": "function", "name": "look", "description": "Looks", "strict": false,
                       "parameters": {"type": "object", "properties": {"at": {"type": "string"}}}}],
            "tool_choice": {"type": "function", "name": "look"},
            "text": {"format": {"type": "json_schema", "name": "answer", "strict": true, "schema": {"type": "object"}}},
            "reasoning": {"effort": "high"},
        })
    );
}

#[test]
fn the_gateways_limit_and_a_continuation_are_sent() {
    let mut context = ctx(false);
    context.continuation = Some("Once upon".into());
    let request = json!({"messages": [{"role": "user", "content": "Tell a story"}]});
    let sent = OpenAiResponses::new(context, request.to_string().into_bytes())
        .request()
        .unwrap();
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["max_output_tokens"], 4096);
    assert_eq!(body["input"][1], json!({"role": "assistant", "content": "Once upon"}));
}

#[test]
fn parameters_the_responses_api_lacks_are_refused_by_name() {
    for (key, value) in [
        ("stop", json!(["\n"])),
        ("seed", json!(7)),
        ("logprobs", json!(true)),
        ("presence_penalty", json!(0.5)),
        ("n", json!(2)),
    ] {
        let mut request = json!({"messages": [{"role": "user", "content": "hi"}]});
        request[key] = value;
        let error = exchange(false, request).request().unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{key}");
        assert!(error.message.contains(&format!("'{key}'")), "{key}: {}", error.message);
    }
    // Their neutral values are not a use.
    let request = json!({"messages": [{"role": "user", "content": "hi"}], "stop": null,
                         "logprobs": false, "frequency_penalty": 0});
    exchange(false, request).request().unwrap();
    let audio = json!({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]});
    assert!(exchange(false, audio).request().is_err());
}

#[test]
fn a_whole_answer_becomes_a_chat_completion() {
    let answer = json!({
        "id": "resp_1", "object": "response", "created_at": 1_700_000_000u64, "status": "completed",
        "model": "gpt-5-pro-2025-10-06",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Hello", "annotations": []},
                         {"type": "output_text", "text": " there", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "look", "arguments": "{\"at\":1}"},
        ],
        "usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 8},
                  "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 50},
    });
    let mut exchange = exchange(false, json!({"messages": [{"role": "user", "content": "hi"}]}));
    exchange.request().unwrap();
    let body = exchange.response(head(), answer.to_string().into_bytes()).unwrap();
    let completion: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(completion["id"], "chatcmpl-resp_1");
    assert_eq!(completion["model"], "gpt-5-pro-2025-10-06");
    assert_eq!(completion["created"], 1_700_000_000u64);
    let choice = &completion["choices"][0];
    assert_eq!(choice["message"]["content"], "Hello there");
    assert_eq!(choice["message"]["tool_calls"][0]["id"], "call_9");
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"at\":1}"
    );
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(completion["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
    assert_eq!(
        exchange.usage(),
        Some(Usage {
            input: 20,
            output: 30,
            cache_read: Some(8),
            cache_write: None,
            reasoning: Some(12)
        })
    );

    let cut = json!({"id": "resp_2", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                     "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hel"}]}],
                     "usage": {"input_tokens": 5, "output_tokens": 3}});
    let mut again = super::tests::exchange(false, json!({"messages": [{"role": "user", "content": "hi"}]}));
    let body = again.response(head(), cut.to_string().into_bytes()).unwrap();
    let completion: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(completion["choices"][0]["finish_reason"], "length");
}

#[test]
fn a_failed_response_is_the_upstreams_error() {
    let failed = json!({"id": "resp_3", "status": "failed", "output": [],
                        "error": {"code": "rate_limit_exceeded", "message": "Slow down"}});
    let mut exchange = exchange(false, json!({"messages": [{"role": "user", "content": "hi"}]}));
    let error = exchange.response(head(), failed.to_string().into_bytes()).unwrap_err();
    assert!(matches!(error.class, ErrorClass::RateLimited(_)), "{error:?}");
    assert_eq!(error.message, "Slow down");
}

fn event(data: Value) -> Event {
    Event {
        name: data["type"].as_str().map(str::to_owned),
        data: data.to_string().into_bytes(),
    }
}

fn chunks(out: Vec<Vec<u8>>) -> Vec<Value> {
    out.iter().map(|c| serde_json::from_slice(c).unwrap()).collect()
}

#[test]
fn a_stream_becomes_chunks() {
    let mut exchange = exchange(true, json!({"messages": [{"role": "user", "content": "hi"}]}));
    exchange.request().unwrap();
    let created = json!({"type": "response.created", "sequence_number": 0,
                         "response": {"id": "resp_s", "model": "gpt-5-pro", "created_at": 1_700_000_001u64, "status": "in_progress", "output": []}});
    let events = vec![
        event(created),
        event(json!({"type": "response.output_item.added", "output_index": 0,
                     "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}})),
        event(
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hi"}),
        ),
        event(
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": " you"}),
        ),
        event(json!({"type": "response.output_text.done", "item_id": "msg_1", "text": "Hi you"})),
        event(json!({"type": "response.output_item.added", "output_index": 1,
                     "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "look", "arguments": ""}})),
        event(
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": "{\"a\""}),
        ),
        event(
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": ":1}"}),
        ),
        event(
            json!({"type": "response.completed", "response": {"id": "resp_s", "status": "completed",
                     "usage": {"input_tokens": 4, "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 2}}}}),
        ),
    ];
    let out = chunks(exchange.on_events(events).unwrap());
    assert_eq!(out.len(), 6, "{out:#?}");
    assert!(
        out.iter()
            .all(|c| c["id"] == "chatcmpl-resp_s" && c["created"] == 1_700_000_001u64)
    );
    assert_eq!(
        out[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": "Hi"})
    );
    assert_eq!(out[1]["choices"][0]["delta"], json!({"content": " you"}));
    let start = &out[2]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(
        (
            start["index"].clone(),
            start["id"].clone(),
            start["function"]["name"].clone()
        ),
        (json!(0), json!("call_1"), json!("look"))
    );
    assert_eq!(
        out[3]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
        "{\"a\""
    );
    assert_eq!(out[5]["choices"][0]["finish_reason"], "tool_calls");
    let end = chunks(exchange.finish().unwrap());
    assert_eq!(end[0]["choices"], json!([]));
    assert_eq!(
        exchange.usage().map(|u| (u.input, u.output, u.reasoning)),
        Some((4, 6, Some(2)))
    );
}

#[test]
fn a_stream_cut_before_completion_or_failing_is_an_error() {
    let mut cut = exchange(true, json!({"messages": [{"role": "user", "content": "hi"}]}));
    cut.on_events(vec![event(
        json!({"type": "response.output_text.delta", "item_id": "m", "delta": "Hi"}),
    )])
    .unwrap();
    assert!(cut.finish().is_err());

    let mut failing = exchange(true, json!({"messages": [{"role": "user", "content": "hi"}]}));
    let error = failing
        .on_events(vec![event(
            json!({"type": "error", "code": "server_is_overloaded", "message": "Overloaded"}),
        )])
        .unwrap_err();
    assert_eq!(error.class, ErrorClass::Overloaded);
}
