//! Unit tests of the OpenAI-compatible adapter: the request it sends, the
//! answers and chunks it passes through, usage and error classification.

use serde_json::{Value, json};
use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, ErrorClass, Event, ResponseHead, Usage};

use crate::OpenAiCompatible;

fn ctx(stream: bool, base_url: &str) -> CallContext {
    CallContext {
        request_id: "req-1".into(),
        upstream_model: "gpt-up".into(),
        base_url: base_url.into(),
        stream,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    }
}

fn adapter(stream: bool) -> OpenAiCompatible {
    let body = json!({"model": "alias", "models": ["x"], "messages": [{"role": "user", "content": "hi"}]});
    OpenAiCompatible::new(
        ctx(stream, "https://api.example.com/v1/"),
        body.to_string().into_bytes(),
    )
}

fn head(status: u16) -> ResponseHead {
    ResponseHead {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
    }
}

fn ev(data: &str) -> Event {
    Event {
        name: None,
        data: data.as_bytes().to_vec(),
    }
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap()
}

#[test]
fn builds_streaming_request() {
    let req = adapter(true).request().unwrap();
    assert_eq!(req.method, "POST");
    assert_eq!(req.url, "https://api.example.com/v1/chat/completions");
    assert_eq!(req.auth, AuthSlot::Bearer);
    assert_eq!(header(&req.headers, "content-type"), "application/json");
    assert_eq!(header(&req.headers, "accept"), "text/event-stream");
    assert_eq!(
        parse(&req.body),
        json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}],
               "stream": true, "stream_options": {"include_usage": true}})
    );
}

#[test]
fn builds_non_streaming_request() {
    let mut a = OpenAiCompatible::new(ctx(false, "http://127.0.0.1:9/v1"), b"{\"messages\":[]}".to_vec());
    let req = a.request().unwrap();
    assert_eq!(req.url, "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(header(&req.headers, "accept"), "application/json");
    assert_eq!(parse(&req.body), json!({"messages": [], "model": "gpt-up"}));
}

#[test]
fn rejects_bad_request_bodies() {
    for body in [&b"nope"[..], b"[]", b"null"] {
        let mut a = OpenAiCompatible::new(ctx(true, "http://x"), body.to_vec());
        assert_eq!(a.request().unwrap_err().class, ErrorClass::InvalidRequest);
    }
}

#[test]
fn translates_whole_response() {
    let mut a = adapter(false);
    let body = json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-up",
        "provider": "SomeCloud",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}
    });
    let out = parse(&a.response(head(200), body.to_string().into_bytes()).unwrap());
    let mut expected = body;
    expected.as_object_mut().unwrap().remove("provider");
    assert_eq!(out, expected);
    assert_eq!(
        a.usage(),
        Some(Usage {
            input: 9,
            output: 3,
            cache_read: Some(4),
            cache_write: None,
            reasoning: None
        })
    );
}

#[test]
fn response_without_provider_passes_through() {
    let mut a = adapter(false);
    let body = b"{ \"id\" : \"c\", \"choices\": [] }".to_vec();
    assert_eq!(a.response(head(200), body.clone()).unwrap(), body);
    assert_eq!(a.usage(), None);
}

#[test]
fn response_errors() {
    let mut a = adapter(false);
    let e = a.response(head(200), b"<html>".to_vec()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Internal);
    assert_eq!(e.message, "upstream returned invalid JSON");
    let e = a.response(head(200), b"[1]".to_vec()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Internal);
    let e = a
        .response(
            head(200),
            br#"{"error":{"message":"overloaded, try later","type":"overloaded_error"}}"#.to_vec(),
        )
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Overloaded);
}

fn chunk(id: &str, content: &str) -> String {
    json!({"id": id, "object": "chat.completion.chunk", "created": 7, "model": "gpt-up",
           "system_fingerprint": "fp1", "provider": "P", "usage": null,
           "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
    .to_string()
}

#[test]
fn streams_chunks_and_holds_back_usage_chunk() {
    let mut a = adapter(true);
    let out = a
        .on_events(vec![ev(&chunk("c1", "Hel")), ev(""), ev(" \n"), ev(&chunk("c1", "lo"))])
        .unwrap();
    assert_eq!(out.len(), 2);
    let first = parse(&out[0]);
    assert_eq!(first["choices"][0]["delta"]["content"], "Hel");
    assert!(first.get("provider").is_none());
    assert_eq!(first["usage"], Value::Null);
    assert_eq!(a.usage(), None);

    let usage_chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 7,
        "model": "gpt-up", "provider": "P", "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                  "completion_tokens_details": {"reasoning_tokens": 1}}});
    let out = a.on_events(vec![ev(&usage_chunk.to_string()), ev("[DONE]")]).unwrap();
    assert!(out.is_empty(), "usage-only chunk is held back");
    assert!(a.saw_done());
    assert_eq!(
        a.usage(),
        Some(Usage {
            input: 5,
            output: 2,
            cache_read: None,
            cache_write: None,
            reasoning: Some(1)
        })
    );

    let fin = a.finish().unwrap();
    assert_eq!(fin.len(), 1);
    let mut expected = usage_chunk;
    expected.as_object_mut().unwrap().remove("provider");
    assert_eq!(parse(&fin[0]), expected);
}

#[test]
fn finish_synthesizes_final_chunk_without_usage() {
    let mut a = adapter(true);
    a.on_events(vec![ev(&chunk("c9", "x")), ev("[DONE]")]).unwrap();
    let fin = a.finish().unwrap();
    assert_eq!(fin.len(), 1);
    assert_eq!(
        parse(&fin[0]),
        json!({"id": "c9", "object": "chat.completion.chunk", "created": 7, "model": "gpt-up",
               "system_fingerprint": "fp1", "choices": []})
    );
}

#[test]
fn finish_is_empty_when_nothing_was_seen() {
    let mut a = adapter(true);
    assert!(a.on_events(vec![ev("[DONE]")]).unwrap().is_empty());
    assert!(a.finish().unwrap().is_empty());
}

/// A body that ends before the provider said the answer is finished (no
/// `finish_reason`, no `[DONE]`) was cut short, however cleanly it ended.
#[test]
fn a_stream_without_finish_reason_or_done_is_cut_short() {
    let mut a = adapter(true);
    let out = a
        .on_events(vec![ev(&chunk("c1", "Hel")), ev(&chunk("c1", "lo"))])
        .unwrap();
    assert_eq!(out.len(), 2, "what arrived is relayed");
    let e = a.finish().unwrap_err();
    assert_eq!(e.class, ErrorClass::Upstream(502));
    assert!(e.message.contains("finish_reason"), "{}", e.message);

    let mut a = adapter(true);
    a.on_events(vec![ev("")]).unwrap();
    assert!(a.finish().is_err(), "an empty body is no answer either");
}

#[test]
fn a_finish_reason_alone_or_done_alone_ends_the_answer() {
    let mut a = adapter(true);
    let finishing = json!({"id": "c1", "created": 7, "model": "gpt-up",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    a.on_events(vec![ev(&chunk("c1", "Hi")), ev(&finishing.to_string())])
        .unwrap();
    assert!(!a.saw_done());
    assert_eq!(a.finish().unwrap().len(), 1);

    let mut a = adapter(true);
    a.on_events(vec![ev(&chunk("c1", "Hi")), ev("[DONE]")]).unwrap();
    assert_eq!(a.finish().unwrap().len(), 1);
}

#[test]
fn usage_on_content_chunk_is_recorded_and_emitted() {
    let mut a = adapter(true);
    let c = json!({"id": "c", "choices": [{"index": 0, "delta": {}}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    assert_eq!(a.on_events(vec![ev(&c.to_string())]).unwrap().len(), 1);
    assert_eq!(a.usage().unwrap().input, 1);
    // An empty-choices chunk without usage (e.g. prompt filter results) is emitted.
    let c = json!({"id": "c", "choices": [], "prompt_filter_results": []});
    assert_eq!(a.on_events(vec![ev(&c.to_string())]).unwrap().len(), 1);
}

#[test]
fn stream_errors() {
    let mut a = adapter(true);
    let e: AdapterError = a.on_events(vec![ev("{not json")]).unwrap_err();
    assert_eq!(e.class, ErrorClass::Internal);

    let e = a
        .on_events(vec![
            ev(&chunk("c", "a")),
            ev(r#"{"error":{"message":"Rate limit exceeded","type":"rate_limit_error"}}"#),
        ])
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::RateLimited(None));
    assert_eq!(e.message, "Rate limit exceeded");

    let e = a
        .on_events(vec![ev(r#"{"error":{"message":"bad gateway","code":502}}"#)])
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Upstream(502));

    let e = a
        .on_events(vec![Event {
            name: Some("error".into()),
            data: br#"{"message":"Overloaded","type":"overloaded_error"}"#.to_vec(),
        }])
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Overloaded);
}

#[test]
fn classifies_upstream_errors() {
    let mut a = adapter(true);
    let e = a.classify_error(
        ResponseHead {
            status: 429,
            headers: vec![("Retry-After".into(), "3".into())],
        },
        br#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#.to_vec(),
    );
    assert_eq!(e.class, ErrorClass::RateLimited(Some(3)));
    assert_eq!(e.message, "slow down");
    let e = a.classify_error(head(401), Vec::new());
    assert_eq!(e.class, ErrorClass::Auth);
    assert_eq!(e.message, "upstream returned HTTP 401");
}
