//! End-to-end tests: a real server on 127.0.0.1:0 driven over HTTP.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tollgate_mock_upstream::{MockOptions, serve};

async fn start(opts: MockOptions) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, opts));
    format!("http://{addr}")
}

async fn post(base: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn completion(base: &str, body: Value) -> Value {
    let resp = post(base, body).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// Reads a stream to its end; returns the `data:` payloads and whether the
/// body ended cleanly (false when the connection was dropped).
async fn read_stream(resp: reqwest::Response) -> (Vec<String>, bool) {
    let mut raw = Vec::new();
    let mut clean = true;
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => raw.extend_from_slice(&bytes),
            Err(_) => {
                clean = false;
                break;
            }
        }
    }
    let text = String::from_utf8(raw).unwrap();
    assert!(text.is_empty() || text.ends_with("\n\n"), "{text:?}");
    let frames = text
        .split_terminator("\n\n")
        .map(|f| f.strip_prefix("data: ").expect(f).to_owned())
        .collect();
    (frames, clean)
}

fn parse(frames: &[String]) -> Vec<Value> {
    frames.iter().map(|f| serde_json::from_str(f).unwrap()).collect()
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[tokio::test]
async fn reply_and_usage_arithmetic() {
    let base = start(MockOptions::default()).await;
    let body = json!({"model": "small", "messages": [
        {"role": "system", "content": "Be brief now"},
        {"role": "user", "content": "hello there mock"},
    ]});
    let v = completion(&base, body).await;
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-mock-"));
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "small");
    assert!(v["created"].as_u64().unwrap() > 0);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], "You said: hello there mock");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    // (3 + 4) + (3 + 4) prompt; 5 reply words.
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 14, "completion_tokens": 5, "total_tokens": 19})
    );

    let parts = json!({"model": "small", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "a b"}, {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "c"},
    ]}]});
    let v = completion(&base, parts).await;
    assert_eq!(v["choices"][0]["message"]["content"], "You said: a b c");
    assert_eq!(v["usage"]["prompt_tokens"], 7);

    let v = completion(
        &base,
        json!({"model": "m", "messages": user("x"), "mock": {"reply": "fixed text"}}),
    )
    .await;
    assert_eq!(v["choices"][0]["message"]["content"], "fixed text");
    assert_eq!(v["usage"]["completion_tokens"], 2);
    let v = completion(
        &base,
        json!({"model": "m", "messages": user("x"), "mock": {"words": 4}}),
    )
    .await;
    assert_eq!(v["choices"][0]["message"]["content"], "word1 word2 word3 word4");
    assert_eq!(v["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn stream_framing_with_usage_chunk() {
    let base = start(MockOptions::default()).await;
    let body = json!({"model": "small", "messages": user("hi"), "stream": true,
        "stream_options": {"include_usage": true}, "mock": {"words": 3}});
    let resp = post(&base, body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let (frames, clean) = read_stream(resp).await;
    assert!(clean);
    assert_eq!(frames.last().unwrap(), "[DONE]");
    let chunks = parse(&frames[..frames.len() - 1]);
    assert_eq!(chunks.len(), 6, "{frames:?}");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["model"], "small");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let words: Vec<&str> = chunks[1..4]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(words, ["word1", " word2", " word3"]);
    assert_eq!(chunks[4]["choices"][0]["finish_reason"], "stop");
    assert!(chunks[4]["usage"].is_null());
    assert_eq!(chunks[5]["choices"], json!([]));
    assert_eq!(
        chunks[5]["usage"],
        json!({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8})
    );

    // Without include_usage: no usage chunk and no usage fields. The default
    // reply streams word by word and concatenates to the non-streamed text.
    let body = json!({"model": "small", "messages": user("hi  there"), "stream": true});
    let (frames, clean) = read_stream(post(&base, body).await).await;
    assert!(clean);
    assert_eq!(frames.len(), 7, "{frames:?}");
    let chunks = parse(&frames[..6]);
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    let text: String = chunks[1..5]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "You said: hi  there");
}

fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            },
            "required": ["city"],
        }}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"zone": {"type": "string", "const": "UTC"}},
        }}},
    ])
}

#[tokio::test]
async fn tool_calls_follow_the_schema() {
    let base = start(MockOptions::default()).await;
    let body = json!({"model": "small", "messages": user("weather?"), "tools": weather_tools()});
    let v = completion(&base, body).await;
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_mock_"));
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "mock", "unit": "celsius", "days": 1}));
    assert_eq!(v["usage"]["completion_tokens"], 1);

    let named = json!({"model": "small", "messages": user("t"), "tools": weather_tools(),
        "tool_choice": {"type": "function", "function": {"name": "get_time"}}});
    let v = completion(&base, named).await;
    let call = &v["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "get_time");
    assert_eq!(call["arguments"], r#"{"zone":"UTC"}"#);

    let none = json!({"model": "small", "messages": user("t"), "tools": weather_tools(), "tool_choice": "none"});
    let v = completion(&base, none).await;
    assert_eq!(v["choices"][0]["message"]["content"], "You said: t");

    let after = json!({"model": "small", "tools": weather_tools(), "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny 21C"},
    ]});
    let v = completion(&base, after).await;
    assert_eq!(v["choices"][0]["message"]["content"], "Tool result: sunny 21C");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");

    // Streamed: a head chunk with id and name, argument fragments, finish.
    let body = json!({"model": "small", "messages": user("weather?"), "tools": weather_tools(), "stream": true});
    let (frames, clean) = read_stream(post(&base, body).await).await;
    assert!(clean);
    assert_eq!(frames.last().unwrap(), "[DONE]");
    let chunks = parse(&frames[..frames.len() - 1]);
    let head = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(head["index"], 0);
    assert_eq!(head["function"]["name"], "get_weather");
    assert_eq!(head["function"]["arguments"], "");
    assert!(head["id"].as_str().unwrap().starts_with("call_mock_"));
    let fragments = &chunks[1..chunks.len() - 1];
    assert_eq!(fragments.len(), 3);
    let streamed: String = fragments
        .iter()
        .map(|c| {
            c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&streamed).unwrap(), args);
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "tool_calls");
}

/// A client run unmodified can be scripted only through its prompt.
#[tokio::test]
async fn a_script_in_the_prompt_calls_the_named_tool_once_or_none() {
    let base = start(MockOptions::default()).await;
    let prompt = r#"<system-reminder>x</system-reminder> read it <mock>{"tool": "get_time", "arguments": {"zone": "CET"}}</mock>"#;
    let body = json!({"model": "small", "messages": user(prompt), "tools": weather_tools()});
    let v = completion(&base, body).await;
    let call = &v["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(
        (call["name"].as_str(), call["arguments"].as_str()),
        (Some("get_time"), Some(r#"{"zone":"CET"}"#))
    );

    // The result came back, followed by more user text: the call is not repeated.
    let after = json!({"model": "small", "tools": weather_tools(), "messages": [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "user", "content": "<system-reminder>more</system-reminder>"},
    ]});
    let v = completion(&base, after).await;
    assert_eq!(v["choices"][0]["message"]["content"], "Tool result: 12:00");

    // No tool named: no call although tools are offered.
    let plain = json!({"model": "small", "tools": weather_tools(),
        "messages": user(r#"hi <mock>{"reply": "scripted pong"}</mock>"#)});
    let v = completion(&base, plain).await;
    assert_eq!(v["choices"][0]["message"]["content"], "scripted pong");

    let unknown = json!({"model": "small", "tools": weather_tools(),
        "messages": user(r#"<mock>{"tool": "rm_rf"}</mock>"#)});
    assert_eq!(post(&base, unknown).await.status(), 400);
}

#[tokio::test]
async fn response_formats() {
    let base = start(MockOptions::default()).await;
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age"]});
    let body = json!({"model": "small", "messages": user("x"), "response_format":
        {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}});
    let v = completion(&base, body).await;
    let content: Value = serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"name": "mock", "age": 1, "tags": ["mock"]}));

    let body = json!({"model": "small", "messages": user("hi"), "response_format": {"type": "json_object"}});
    let v = completion(&base, body).await;
    assert_eq!(v["choices"][0]["message"]["content"], r#"{"reply":"You said: hi"}"#);
}

async fn assert_error(resp: reqwest::Response, status: u16, kind: &str, code: &str) {
    assert_eq!(resp.status(), status);
    let v: Value = resp.json().await.unwrap();
    let err = &v["error"];
    assert_eq!(err["type"], kind, "{v}");
    assert_eq!(err["code"], code, "{v}");
    assert!(err["message"].is_string() && err.get("param").is_some(), "{v}");
}

#[tokio::test]
async fn status_faults() {
    let base = start(MockOptions::default()).await;
    let fault = |mock: Value| json!({"model": "small", "messages": user("x"), "mock": mock});
    let resp = post(&base, fault(json!({"status": 429, "retry_after": 7}))).await;
    assert_eq!(resp.headers()["retry-after"], "7");
    assert_error(resp, 429, "rate_limit_error", "rate_limit_exceeded").await;
    assert_error(
        post(&base, fault(json!({"status": 500}))).await,
        500,
        "server_error",
        "server_error",
    )
    .await;
    assert_error(
        post(&base, fault(json!({"status": 503}))).await,
        503,
        "server_error",
        "overloaded",
    )
    .await;
    assert_error(
        post(&base, fault(json!({"status": 401}))).await,
        401,
        "invalid_request_error",
        "invalid_api_key",
    )
    .await;
    let ctx = fault(json!({"status": 400, "error_code": "context_length_exceeded"}));
    assert_error(
        post(&base, ctx).await,
        400,
        "invalid_request_error",
        "context_length_exceeded",
    )
    .await;
    // Streaming requests fail before the stream starts.
    let mut streamed = fault(json!({"status": 500}));
    streamed["stream"] = json!(true);
    assert_error(post(&base, streamed).await, 500, "server_error", "server_error").await;

    let by_model = |model: &str| json!({"model": model, "messages": user("x")});
    assert_error(
        post(&base, by_model("fail-429")).await,
        429,
        "rate_limit_error",
        "rate_limit_exceeded",
    )
    .await;
    assert_error(
        post(&base, by_model("fail-500")).await,
        500,
        "server_error",
        "server_error",
    )
    .await;

    let bad = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_error(bad, 400, "invalid_request_error", "invalid_json").await;
    let no_model = post(&base, json!({"messages": user("x")})).await;
    assert_eq!(no_model.status(), 400);
    let v: Value = no_model.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(v["error"]["message"].as_str().unwrap().contains("model"), "{v}");
}

#[tokio::test]
async fn stream_faults() {
    let base = start(MockOptions::default()).await;
    let stream =
        |model: &str, mock: Value| json!({"model": model, "messages": user("x"), "stream": true, "mock": mock});
    let (frames, clean) = read_stream(post(&base, stream("small", json!({"words": 5, "cut_after": 2}))).await).await;
    assert!(!clean, "cut must drop the connection");
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert!(!frames.iter().any(|f| f == "[DONE]"));

    // cut-<n>: the role chunk plus n content chunks.
    let (frames, clean) = read_stream(post(&base, stream("cut-2", json!({"words": 5}))).await).await;
    assert!(!clean);
    assert_eq!(frames.len(), 3, "{frames:?}");

    let (frames, clean) =
        read_stream(post(&base, stream("small", json!({"words": 5, "stream_error_after": 2}))).await).await;
    assert!(clean);
    assert_eq!(frames.len(), 3, "{frames:?}");
    let err: Value = serde_json::from_str(&frames[2]).unwrap();
    assert_eq!(err["error"]["type"], "rate_limit_error");
    assert_eq!(err["error"]["code"], "rate_limit_exceeded");
    assert_eq!(err["error"]["message"], "rate limited");

    // eof-<n>: the role chunk plus n content chunks, then a clean end without
    // a finish_reason or [DONE] (also with the usage chunk asked for).
    for request in [
        stream("eof-2", json!({"words": 5})),
        json!({"model": "small", "messages": user("x"), "stream": true,
               "stream_options": {"include_usage": true}, "mock": {"words": 5, "eof_after": 40}}),
    ] {
        let (frames, clean) = read_stream(post(&base, request.clone()).await).await;
        assert!(clean, "an eof stream ends cleanly: {request}");
        assert!(!frames.iter().any(|f| f == "[DONE]"), "{frames:?}");
        for frame in &frames {
            let chunk: Value = serde_json::from_str(frame).unwrap();
            assert!(chunk["choices"][0]["finish_reason"].is_null(), "{frame}");
        }
    }
    let (frames, _) = read_stream(post(&base, stream("eof-2", json!({"words": 5}))).await).await;
    assert_eq!(frames.len(), 3, "{frames:?}");

    // Non-streaming cut: the head arrives, the body never does.
    let resp = post(&base, json!({"model": "cut-1", "messages": user("x")})).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.is_err());
}

#[tokio::test]
async fn latency_faults() {
    let base = start(MockOptions {
        latency_ms: 20,
        ..Default::default()
    })
    .await;
    let timed = async |body: Value| {
        let start = Instant::now();
        post(&base, body).await.bytes().await.unwrap();
        start.elapsed()
    };
    let plain = json!({"model": "small", "messages": user("x")});
    assert!(timed(plain).await >= Duration::from_millis(20));
    let slow = json!({"model": "small", "messages": user("x"), "mock": {"latency_ms": 60}});
    assert!(timed(slow).await >= Duration::from_millis(80));
    let slow_model = json!({"model": "slow-60", "messages": user("x")});
    assert!(timed(slow_model).await >= Duration::from_millis(80));
    // Role, 3 words, finish, [DONE]: five gaps of 15 ms.
    let paced = json!({"model": "small", "messages": user("x"), "stream": true,
        "mock": {"words": 3, "chunk_delay_ms": 15}});
    assert!(timed(paced).await >= Duration::from_millis(20 + 5 * 15));
}

#[tokio::test]
async fn recorder_keeps_the_last_64() {
    let base = start(MockOptions::default()).await;
    let client = reqwest::Client::new();
    for i in 0..70 {
        client
            .post(format!("{base}/v1/chat/completions"))
            .header("X-Test", i.to_string())
            .json(&json!({"model": "small", "messages": user(&format!("n{i}"))}))
            .send()
            .await
            .unwrap();
    }
    let list: Vec<Value> = client
        .get(format!("{base}/__mock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.len(), 64);
    let first = &list[0];
    assert_eq!(first["method"], "POST");
    assert_eq!(first["path"], "/v1/chat/completions");
    assert_eq!(first["headers"]["x-test"], "6");
    assert_eq!(first["headers"]["content-type"], "application/json");
    assert_eq!(first["body"]["messages"][0]["content"], "n6");
    assert_eq!(list[63]["body"]["messages"][0]["content"], "n69");

    let cleared = client.delete(format!("{base}/__mock/requests")).send().await.unwrap();
    assert!(cleared.status().is_success());
    let list: Vec<Value> = client
        .get(format!("{base}/__mock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(list.is_empty());
}

#[tokio::test]
async fn api_key_models_and_health() {
    let opts = MockOptions {
        require_api_key: Some("sk-test".into()),
        ..Default::default()
    };
    let base = start(opts).await;
    let client = reqwest::Client::new();
    let chat = |key: Option<&str>| {
        let mut req = client
            .post(format!("{base}/v1/chat/completions"))
            .json(&json!({"model": "small", "messages": user("x")}));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        req.send()
    };
    assert_error(
        chat(None).await.unwrap(),
        401,
        "invalid_request_error",
        "invalid_api_key",
    )
    .await;
    assert_error(
        chat(Some("sk-wrong")).await.unwrap(),
        401,
        "invalid_request_error",
        "invalid_api_key",
    )
    .await;
    assert_eq!(chat(Some("sk-test")).await.unwrap().status(), 200);

    let models = client.get(format!("{base}/v1/models")).send().await.unwrap();
    assert_eq!(models.status(), 401);
    let models: Value = client
        .get(format!("{base}/v1/models"))
        .bearer_auth("sk-test")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"small") && ids.contains(&"large"));

    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
}
