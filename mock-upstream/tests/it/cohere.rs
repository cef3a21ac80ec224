//! The Cohere route: `POST /v2/chat`, answered like the OpenAI route (same
//! text, tool arguments, token counts and faults) in Cohere's v2 shapes, with
//! Cohere's validation, `{"id", "message"}` errors and bearer auth.

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tollgate_mock_upstream::{MockOptions, serve};

async fn start(opts: MockOptions) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, opts));
    format!("http://{addr}")
}

fn user(model: &str, text: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

async fn post(base: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v2/chat"))
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn chat(base: &str, body: &Value) -> (u16, Value) {
    let resp = post(base, body).await;
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// The events of an SSE body, checking that each `event:` name equals the
/// `type` of its data.
fn sse_events(text: &str) -> Vec<Value> {
    assert!(text.ends_with("\n\n"), "{text:?}");
    text.split("\n\n")
        .filter(|frame| !frame.is_empty())
        .map(|frame| {
            let (name, data) = frame.split_once('\n').unwrap();
            let event: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(Some(name.strip_prefix("event: ").unwrap()), event["type"].as_str());
            event
        })
        .collect()
}

async fn stream(base: &str, mut body: Value) -> Vec<Value> {
    body["stream"] = json!(true);
    let resp = post(base, &body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    sse_events(&resp.text().await.unwrap())
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn chat_answers_like_the_openai_route() {
    let base = start(MockOptions::default()).await;
    let body = json!({
        "model": "command-a-03-2025",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "hello cohere"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}
            ]}
        ],
        "temperature": 0.5, "p": 0.9, "max_tokens": 100, "stop_sequences": ["END"]
    });
    let (status, answer) = chat(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["message"]["role"], "assistant");
    assert_eq!(
        answer["message"]["content"],
        json!([{"type": "text", "text": "You said: hello cohere"}])
    );
    assert_eq!(answer["finish_reason"], "COMPLETE");
    assert!(answer["id"].as_str().unwrap().starts_with("mock-cohere-"));

    let openai: Value = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello cohere"}
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let usage = &answer["usage"];
    assert_eq!(usage["billed_units"]["input_tokens"], openai["usage"]["prompt_tokens"]);
    assert_eq!(
        usage["billed_units"]["output_tokens"],
        openai["usage"]["completion_tokens"]
    );
    // `tokens` also counts the pretend prompt template.
    assert_eq!(
        usage["tokens"]["input_tokens"].as_u64().unwrap(),
        openai["usage"]["prompt_tokens"].as_u64().unwrap() + 100
    );
}

#[tokio::test]
async fn streams_typed_events_one_word_each() {
    let base = start(MockOptions::default()).await;
    let events = stream(&base, user("command-r-08-2024", "one two three")).await;
    assert_eq!(
        types(&events),
        [
            "message-start",
            "content-start",
            "content-delta",
            "content-delta",
            "content-delta",
            "content-delta",
            "content-delta",
            "content-end",
            "message-end"
        ]
    );
    assert_eq!(events[0]["delta"]["message"]["role"], "assistant");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "content-delta")
        .map(|e| e["delta"]["message"]["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "You said: one two three");
    let end = &events[8]["delta"];
    assert_eq!(end["finish_reason"], "COMPLETE");
    assert_eq!(
        end["usage"]["billed_units"],
        json!({"input_tokens": 7, "output_tokens": 5})
    );
}

fn weather_tools() -> Value {
    json!([{"type": "function", "function": {
        "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    }}])
}

#[tokio::test]
async fn tool_calls_and_results() {
    let base = start(MockOptions::default()).await;
    let mut body = user("command-a-03-2025", "weather in Paris?");
    body["tools"] = weather_tools();
    body["tool_choice"] = json!("REQUIRED");
    let (status, answer) = chat(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["finish_reason"], "TOOL_CALL");
    let call = &answer["message"]["tool_calls"][0];
    let id = call["id"].as_str().unwrap();
    assert!(id.starts_with("get_weather_"), "{id}");
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], "{\"city\":\"mock\"}");

    let events = stream(&base, body.clone()).await;
    assert_eq!(types(&events)[..2], ["message-start", "tool-call-start"]);
    let start = &events[1]["delta"]["message"]["tool_calls"];
    assert_eq!(start["function"]["name"], "get_weather");
    let arguments: String = events
        .iter()
        .filter(|e| e["type"] == "tool-call-delta")
        .map(|e| {
            e["delta"]["message"]["tool_calls"]["function"]["arguments"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(arguments, "{\"city\":\"mock\"}");
    assert!(events.iter().filter(|e| e["type"] == "tool-call-delta").count() > 1);
    assert_eq!(events.last().unwrap()["delta"]["finish_reason"], "TOOL_CALL");

    body["messages"] = json!([
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "tool_plan": "I will check.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": id, "content": [{"type": "text", "text": "sunny"}]}
    ]);
    body.as_object_mut().unwrap().remove("tool_choice");
    let (status, answer) = chat(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["message"]["content"][0]["text"], "Tool result: sunny");

    body["tool_choice"] = json!("NONE");
    body["messages"] = json!([{"role": "user", "content": "no tools"}]);
    let (_, answer) = chat(&base, &body).await;
    assert_eq!(answer["message"]["content"][0]["text"], "You said: no tools");
}

#[tokio::test]
async fn json_output() {
    let base = start(MockOptions::default()).await;
    let mut body = user("command-a-03-2025", "hi");
    body["response_format"] = json!({"type": "json_object"});
    let (_, answer) = chat(&base, &body).await;
    let text = answer["message"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"reply": "You said: hi"})
    );

    body["response_format"] = json!({"type": "json_object", "json_schema": {
        "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]
    }});
    let (_, answer) = chat(&base, &body).await;
    let text = answer["message"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"name": "mock", "age": 1})
    );
}

#[tokio::test]
async fn continues_a_trailing_assistant_turn() {
    let base = start(MockOptions::default()).await;
    let body = json!({"model": "m", "messages": [
        {"role": "user", "content": "a b"},
        {"role": "assistant", "content": "You said:"}
    ]});
    let (_, answer) = chat(&base, &body).await;
    assert_eq!(answer["message"]["content"][0]["text"], " a b");
}

#[tokio::test]
async fn validates_like_cohere() {
    let base = start(MockOptions::default()).await;
    let cases = [
        (json!({"messages": [{"role": "user", "content": "x"}]}), "model"),
        (json!({"model": "m", "messages": []}), "messages"),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 0.5}),
            "'top_p'",
        ),
        (
            json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
            "role",
        ),
        (json!({"model": "m", "messages": [{"role": "user"}]}), "content"),
        (
            json!({"model": "m", "messages": [{"role": "assistant"}]}),
            "content or tool_calls",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "t", "content": "y"}]}),
            "'t'",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "audio"}]}]}),
            "type",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "p": 1.0}),
            "p must be between",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "presence_penalty": -1}),
            "presence_penalty",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop_sequences": ["1","2","3","4","5","6"]}),
            "stop_sequences",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "AUTO"}),
            "tool_choice",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]}),
            "parameters",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}}),
            "response_format",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
            "max_tokens",
        ),
    ];
    for (body, needle) in cases {
        let (status, error) = chat(&base, &body).await;
        assert_eq!(status, 400, "{body}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.starts_with("invalid request: "), "{message}");
        assert!(message.contains(needle), "{needle} not in {message}");
        assert!(error["id"].is_string());
    }
    let resp = reqwest::Client::new()
        .post(format!("{base}/v2/chat"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
}

#[tokio::test]
async fn model_name_faults_use_cohere_errors() {
    let base = start(MockOptions::default()).await;
    for (model, code, needle) in [
        ("fail-429", 429, "too many requests"),
        ("fail-503", 503, "service unavailable"),
        ("fail-500", 500, "internal server error"),
        ("fail-498", 498, "blocked api token"),
        ("fail-402", 402, "payment"),
    ] {
        let (got, error) = chat(&base, &user(model, "x")).await;
        assert_eq!(got, code, "{model}");
        assert!(error["message"].as_str().unwrap().contains(needle), "{error}");
    }

    let mut body = user("m", "x");
    body["mock"] = json!({"status": 400, "error_code": "context_length_exceeded"});
    let (got, error) = chat(&base, &body).await;
    assert_eq!(got, 400);
    assert!(error["message"].as_str().unwrap().starts_with("too many tokens: "));

    body["mock"] = json!({"status": 429, "retry_after": 7});
    let resp = post(&base, &body).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
}

#[tokio::test]
async fn stream_faults() {
    let base = start(MockOptions::default()).await;
    let events = stream(&base, user("ratelimit-2", "a b c d")).await;
    assert_eq!(
        types(&events),
        [
            "message-start",
            "content-start",
            "content-delta",
            "content-delta",
            "message-end"
        ]
    );
    let end = &events[4]["delta"];
    assert_eq!(end["finish_reason"], "ERROR");
    assert!(end["error"].as_str().unwrap().starts_with("too many requests"));

    let mut body = user("cut-2", "a b c d");
    body["stream"] = json!(true);
    let mut resp = post(&base, &body).await;
    assert_eq!(resp.status(), 200);
    let mut received = Vec::new();
    let broke = loop {
        match resp.chunk().await {
            Ok(Some(bytes)) => received.extend_from_slice(&bytes),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(broke, "a cut stream must end abruptly");
    let text = String::from_utf8(received).unwrap();
    assert_eq!(text.matches("event: content-delta").count(), 2, "{text}");
    assert!(!text.contains("message-end"));

    // eof-<n>: the same deltas, then a clean end without message-end.
    let events = stream(&base, user("eof-2", "a b c d")).await;
    assert_eq!(
        types(&events),
        ["message-start", "content-start", "content-delta", "content-delta"]
    );
}

#[tokio::test]
async fn bearer_auth() {
    let base = start(MockOptions {
        require_api_key: Some("k1".into()),
        ..Default::default()
    })
    .await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v2/chat");
    let ok = http
        .post(&url)
        .bearer_auth("k1")
        .json(&user("m", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);

    let wrong = http
        .post(&url)
        .bearer_auth("k2")
        .json(&user("m", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let error: Value = wrong.json().await.unwrap();
    assert_eq!(error["message"], "invalid api token");

    let none = http.post(&url).json(&user("m", "x")).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let error: Value = none.json().await.unwrap();
    assert_eq!(error["message"], "no api key supplied");
}

#[tokio::test]
async fn stop_sequences_and_max_tokens_cut_the_text() {
    let base = start(MockOptions::default()).await;
    let mut body = user("m", "one two three");
    body["stop_sequences"] = json!(["three", "two"]);
    let (_, answer) = chat(&base, &body).await;
    assert_eq!(answer["message"]["content"][0]["text"], "You said: one ");
    assert_eq!(answer["finish_reason"], "STOP_SEQUENCE");
    assert_eq!(answer["usage"]["billed_units"]["output_tokens"], 3);

    body.as_object_mut().unwrap().remove("stop_sequences");
    body["max_tokens"] = json!(2);
    let (_, answer) = chat(&base, &body).await;
    assert_eq!(answer["message"]["content"][0]["text"], "You said:");
    assert_eq!(answer["finish_reason"], "MAX_TOKENS");
    let events = stream(&base, body).await;
    assert_eq!(events.iter().filter(|e| e["type"] == "content-delta").count(), 2);
    let end = &events.last().unwrap()["delta"];
    assert_eq!(end["finish_reason"], "MAX_TOKENS");
    assert_eq!(end["usage"]["billed_units"]["output_tokens"], 2);
}
