//! The Anthropic route: `POST /v1/messages`, answered like the OpenAI route
//! (same text, tool input, token counts and faults) in Anthropic's shapes,
//! with its validation, error bodies, SSE events and `x-api-key` auth.

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tollgate_mock_upstream::{MockOptions, serve};

async fn start(opts: MockOptions) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, opts));
    format!("http://{addr}")
}

fn request(model: &str, text: &str) -> Value {
    json!({"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": text}]})
}

async fn send(base: &str, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = reqwest::Client::new().post(format!("{base}/v1/messages")).json(body);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap()
}

const VERSION: (&str, &str) = ("anthropic-version", "2023-06-01");

async fn messages(base: &str, body: &Value) -> (u16, Value) {
    let resp = send(base, body, &[VERSION]).await;
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// `(event name, data)` of an SSE body, checking the two fields agree.
fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|frame| !frame.is_empty())
        .map(|frame| {
            let (event, data) = frame.split_once('\n').unwrap();
            let name = event.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str(), "{frame}");
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn messages_answer_like_the_openai_route() {
    let base = start(MockOptions::default()).await;
    let body = json!({
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "hello claude"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
        ]}]
    });
    let (status, answer) = messages(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "message");
    assert_eq!(answer["role"], "assistant");
    assert_eq!(
        answer["content"],
        json!([{"type": "text", "text": "You said: hello claude"}])
    );
    assert_eq!(answer["stop_reason"], "end_turn");
    assert_eq!(answer["stop_sequence"], Value::Null);
    assert!(answer["id"].as_str().unwrap().starts_with("msg_mock_"));

    let openai: Value = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "claude-haiku-4-5", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello claude"}
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["usage"]["input_tokens"], openai["usage"]["prompt_tokens"]);
    assert_eq!(answer["usage"]["output_tokens"], openai["usage"]["completion_tokens"]);
}

#[tokio::test]
async fn stream_events_follow_the_protocol() {
    let base = start(MockOptions::default()).await;
    let mut body = request("claude-haiku-4-5", "one two three");
    body["stream"] = json!(true);
    let resp = send(&base, &body, &[VERSION]).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = sse_events(&resp.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(
        names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "You said: one two three");
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 7);
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 5);
}

#[tokio::test]
async fn tool_use_and_its_result() {
    let base = start(MockOptions::default()).await;
    let tools = json!([{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    let mut body = request("claude-haiku-4-5", "weather?");
    body["tools"] = tools.clone();
    body["tool_choice"] = json!({"type": "tool", "name": "get_weather"});
    let (status, answer) = messages(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["stop_reason"], "tool_use");
    let call = &answer["content"][0];
    assert_eq!(call["type"], "tool_use");
    assert_eq!(call["input"], json!({"city": "mock"}));

    body["messages"] = json!([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": [{"type": "text", "text": "sunny"}]}]}
    ]);
    body["tool_choice"] = json!({"type": "auto"});
    let (status, answer) = messages(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["content"][0]["text"], "Tool result: sunny");

    // Streamed: the input arrives as input_json_delta fragments.
    body["messages"] = json!([{"role": "user", "content": "weather?"}]);
    body["stream"] = json!(true);
    let events = sse_events(&send(&base, &body, &[VERSION]).await.text().await.unwrap());
    let fragments: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(fragments[0], "");
    assert!(fragments.len() > 2);
    assert_eq!(
        serde_json::from_str::<Value>(&fragments.concat()).unwrap(),
        json!({"city": "mock"})
    );
}

#[tokio::test]
async fn structured_output_stop_sequences_and_max_tokens() {
    let base = start(MockOptions::default()).await;
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false});
    let mut body = request("claude-haiku-4-5", "Ada");
    body["output_config"] = json!({"format": {"type": "json_schema", "schema": schema}});
    let (status, answer) = messages(&base, &body).await;
    assert_eq!(status, 200, "{answer}");
    let text = answer["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), json!({"name": "mock"}));

    let mut body = request("claude-haiku-4-5", "one two three");
    body["stop_sequences"] = json!(["two"]);
    let (_, answer) = messages(&base, &body).await;
    assert_eq!(answer["content"][0]["text"], "You said: one ");
    assert_eq!(answer["stop_reason"], "stop_sequence");
    assert_eq!(answer["stop_sequence"], "two");

    let mut body = request("claude-haiku-4-5", "one two three");
    body["max_tokens"] = json!(2);
    let (_, answer) = messages(&base, &body).await;
    assert_eq!(answer["content"][0]["text"], "You said:");
    assert_eq!(answer["stop_reason"], "max_tokens");
    assert_eq!(answer["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn invalid_requests_get_anthropic_errors() {
    let base = start(MockOptions::default()).await;
    let ok = request("claude-haiku-4-5", "hi");
    let with = |patch: Value| {
        let mut body = ok.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases = [
        (json!({"max_tokens": null}), "max_tokens"),
        (
            json!({"frequency_penalty": 1}),
            "frequency_penalty: Extra inputs are not permitted",
        ),
        (json!({"messages": []}), "at least one message"),
        (json!({"temperature": 1.5}), "temperature"),
        (json!({"messages": [{"role": "system", "content": "x"}]}), "role"),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]}),
            "non-empty",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y "}]}),
            "trailing whitespace",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}, {"role": "user", "content": "z"}]}),
            "without `tool_result`",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "r"}]}]}),
            "unexpected `tool_use_id`",
        ),
        (
            json!({"output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {}}}}}),
            "additionalProperties",
        ),
        (
            json!({"tools": [{"name": "bad name", "input_schema": {"type": "object"}}]}),
            "name",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/tiff", "data": "AAAA"}}]}]}),
            "media_type",
        ),
    ];
    for (patch, needle) in cases {
        let (status, answer) = messages(&base, &with(patch.clone())).await;
        assert_eq!(status, 400, "{patch}: {answer}");
        assert_eq!(answer["type"], "error");
        assert_eq!(answer["error"]["type"], "invalid_request_error");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{patch}: {message}");
    }
    let resp = send(&base, &ok, &[]).await;
    assert_eq!(resp.status(), 400);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"]["message"], "anthropic-version: header is required");
}

#[tokio::test]
async fn keys_are_checked_in_x_api_key_or_as_a_bearer_token() {
    let base = start(MockOptions {
        require_api_key: Some("sekrit".into()),
        ..Default::default()
    })
    .await;
    let body = request("claude-haiku-4-5", "hi");
    for (headers, status) in [
        (vec![VERSION, ("x-api-key", "sekrit")], 200),
        (vec![VERSION, ("authorization", "Bearer sekrit")], 200),
        (vec![VERSION, ("x-api-key", "wrong")], 401),
        (vec![VERSION], 401),
    ] {
        let resp = send(&base, &body, &headers).await;
        assert_eq!(resp.status().as_u16(), status, "{headers:?}");
        if status == 401 {
            let answer: Value = resp.json().await.unwrap();
            assert_eq!(answer["error"]["type"], "authentication_error");
        }
    }
}

#[tokio::test]
async fn faults_from_model_names() {
    let base = start(MockOptions::default()).await;
    let resp = send(&base, &request("fail-429", "hi"), &[VERSION]).await;
    assert_eq!(resp.status(), 429);
    assert!(resp.headers()["request-id"].to_str().unwrap().starts_with("req_mock_"));
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"]["type"], "rate_limit_error");
    let (status, answer) = messages(&base, &request("fail-529", "hi")).await;
    assert_eq!(
        (status, answer["error"]["type"].as_str()),
        (529, Some("overloaded_error"))
    );

    let mut body = request("claude-haiku-4-5", "hi");
    body["mock"] = json!({"status": 400, "error_code": "context_length_exceeded"});
    let (status, answer) = messages(&base, &body).await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("prompt is too long: ")
    );
    body["mock"] = json!({"status": 429, "retry_after": 7});
    let resp = send(&base, &body, &[VERSION]).await;
    assert_eq!(resp.headers()["retry-after"], "7");

    // ratelimit-2: the preamble, two deltas, then an error event.
    let mut body = request("ratelimit-2", "one two three");
    body["stream"] = json!(true);
    let events = sse_events(&send(&base, &body, &[VERSION]).await.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "error"
        ]
    );
    assert_eq!(events[5].1["error"]["type"], "rate_limit_error");

    // cut-1: the preamble and one delta, then the connection drops.
    let mut body = request("cut-1", "one two three");
    body["stream"] = json!(true);
    let resp = send(&base, &body, &[VERSION]).await;
    assert!(resp.text().await.is_err(), "a cut stream must not end cleanly");

    // eof-1: the same, then a clean end without message_delta or message_stop.
    let mut body = request("eof-1", "one two three");
    body["stream"] = json!(true);
    let text = send(&base, &body, &[VERSION]).await.text().await.unwrap();
    let names: Vec<String> = sse_events(&text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["message_start", "content_block_start", "ping", "content_block_delta"]
    );
}

#[tokio::test]
async fn count_tokens_counts_what_the_answer_bills() {
    let base = start(MockOptions::default()).await;
    let body =
        json!({"model": "claude-x", "system": "Be brief.", "messages": [{"role": "user", "content": "hello claude"}]});
    let count = |body: Value| {
        let base = base.clone();
        async move {
            let resp = reqwest::Client::new()
                .post(format!("{base}/v1/messages/count_tokens"))
                .header(VERSION.0, VERSION.1)
                .json(&body)
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    let (status, counted) = count(body.clone()).await;
    assert_eq!((status, &counted), (200, &json!({"input_tokens": 12})));
    let mut answered = body.clone();
    answered["max_tokens"] = json!(50);
    let (_, answer) = messages(&base, &answered).await;
    assert_eq!(answer["usage"]["input_tokens"], counted["input_tokens"]);
    // An answer's own settings are no part of a count.
    let (status, error) = count(answered).await;
    assert_eq!(status, 400);
    assert_eq!(error["error"]["message"], "max_tokens: Extra inputs are not permitted");
}
