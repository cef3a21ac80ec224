//! The Bedrock Converse routes: answers equal to the OpenAI route's, real
//! event-stream frames, Bedrock's validation and error shapes, model-name
//! faults, and the SigV4 header check under `--api-key`.

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use bytes::BytesMut;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tollgate_mock_upstream::{MockOptions, serve};

const HAIKU: &str = "anthropic.claude-3-5-haiku-20241022-v1%3A0";

async fn start(opts: MockOptions) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, opts));
    format!("http://{addr}")
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"text": text}]})
}

fn weather_config() -> Value {
    json!({"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}}]})
}

async fn post(base: &str, model: &str, operation: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/model/{model}/{operation}"))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// One decoded event-stream message: (`:message-type`, type header value, payload).
type Frame = (String, String, Value);

fn header(message: &aws_smithy_types::event_stream::Message, name: &str) -> String {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|v| v.as_str().to_owned())
        .unwrap_or_default()
}

fn decode(bytes: &[u8]) -> Vec<Frame> {
    let mut buffer = BytesMut::from(bytes);
    let mut decoder = MessageFrameDecoder::new();
    let mut frames = Vec::new();
    while let DecodedFrame::Complete(message) = decoder.decode_frame(&mut buffer).unwrap() {
        let kind = header(&message, ":message-type");
        let name = if kind == "exception" {
            header(&message, ":exception-type")
        } else {
            header(&message, ":event-type")
        };
        assert_eq!(header(&message, ":content-type"), "application/json");
        frames.push((kind, name, serde_json::from_slice(message.payload()).unwrap()));
    }
    assert!(buffer.is_empty(), "bytes left after the last frame");
    frames
}

async fn stream(base: &str, model: &str, body: &Value) -> Vec<Frame> {
    let resp = post(base, model, "converse-stream", body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/vnd.amazon.eventstream");
    decode(&resp.bytes().await.unwrap())
}

fn names(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|(_, name, _)| name.as_str()).collect()
}

#[tokio::test]
async fn converse_answers_like_the_openai_route() {
    let base = start(MockOptions::default()).await;
    let body = json!({"messages": [user("hello bedrock")], "system": [{"text": "Be brief."}],
                      "inferenceConfig": {"maxTokens": 100, "temperature": 0.5}});
    let resp = post(&base, HAIKU, "converse", &body).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("x-amzn-requestid"));
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(
        answer["output"]["message"],
        json!({"role": "assistant", "content": [{"text": "You said: hello bedrock"}]})
    );
    assert_eq!(answer["stopReason"], "end_turn");
    // (2 + 4) + (2 + 4) prompt tokens, as the OpenAI route counts the same conversation.
    assert_eq!(
        answer["usage"],
        json!({"inputTokens": 12, "outputTokens": 4, "totalTokens": 16})
    );
    assert!(answer["metrics"]["latencyMs"].is_u64());

    let recorded: Value = reqwest::get(format!("{base}/__mock/requests"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = recorded.as_array().unwrap().last().unwrap();
    assert_eq!(last["path"], format!("/model/{HAIKU}/converse"));
    assert_eq!(last["body"], body);
}

#[tokio::test]
async fn converse_stream_sends_event_stream_frames() {
    let base = start(MockOptions::default()).await;
    let frames = stream(
        &base,
        "amazon.nova-pro-v1%3A0",
        &json!({"messages": [user("one two three")]}),
    )
    .await;
    assert_eq!(
        names(&frames),
        [
            "messageStart",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockStop",
            "messageStop",
            "metadata"
        ]
    );
    assert!(
        frames
            .iter()
            .all(|(kind, _, payload)| kind == "event" && payload["p"].is_string())
    );
    let text: String = frames
        .iter()
        .filter_map(|(_, _, p)| p["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "You said: one two three");
    assert_eq!(frames[0].2["role"], "assistant");
    assert_eq!(frames[7].2["stopReason"], "end_turn");
    assert_eq!(
        frames[8].2["usage"],
        json!({"inputTokens": 7, "outputTokens": 5, "totalTokens": 12})
    );
}

#[tokio::test]
async fn tool_use_round_trip() {
    let base = start(MockOptions::default()).await;
    let ask = json!({"messages": [user("weather in Paris?")], "toolConfig": weather_config()});
    let answer: Value = post(&base, HAIKU, "converse", &ask).await.json().await.unwrap();
    assert_eq!(answer["stopReason"], "tool_use");
    let tool_use = &answer["output"]["message"]["content"][0]["toolUse"];
    assert_eq!(tool_use["name"], "get_weather");
    assert_eq!(tool_use["input"], json!({"city": "mock"}));
    let id = tool_use["toolUseId"].as_str().unwrap();

    let frames = stream(&base, HAIKU, &ask).await;
    assert_eq!(frames[1].1, "contentBlockStart");
    assert_eq!(frames[1].2["start"]["toolUse"]["name"], "get_weather");
    let input: String = frames
        .iter()
        .filter_map(|(_, _, p)| p["delta"]["toolUse"]["input"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&input).unwrap(), json!({"city": "mock"}));

    let follow_up = json!({
        "messages": [
            user("weather in Paris?"),
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": id, "name": "get_weather", "input": {"city": "mock"}}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": id, "content": [{"text": "sunny"}]}}]}
        ],
        "toolConfig": weather_config()
    });
    let answer: Value = post(&base, HAIKU, "converse", &follow_up).await.json().await.unwrap();
    assert_eq!(answer["output"]["message"]["content"][0]["text"], "Tool result: sunny");
    assert_eq!(answer["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_trailing_assistant_turn_is_continued() {
    let base = start(MockOptions::default()).await;
    let body = json!({"messages": [user("one two"), {"role": "assistant", "content": [{"text": "You said: one"}]}]});
    let answer: Value = post(&base, HAIKU, "converse", &body).await.json().await.unwrap();
    assert_eq!(answer["output"]["message"]["content"][0]["text"], " two");
}

async fn error_of(resp: reqwest::Response) -> (u16, String, String) {
    let status = resp.status().as_u16();
    let kind = resp.headers()["x-amzn-errortype"].to_str().unwrap().to_owned();
    let body: Value = resp.json().await.unwrap();
    (
        status,
        kind.split(':').next().unwrap().to_owned(),
        body["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn validation_errors_use_bedrock_s_shape() {
    let base = start(MockOptions::default()).await;
    let tool_use = json!({"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "w", "input": {}}}]});
    let result = json!({"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{"text": "r"}]}}]});
    for (body, needle) in [
        (
            json!({"messages": [user("a"), user("b")]}),
            "alternate between user and assistant",
        ),
        (json!({"messages": []}), "must start with a user message"),
        (
            json!({"messages": [user("q"), tool_use, result]}),
            "toolConfig field must be defined",
        ),
        (
            json!({"messages": [user("q")], "inferenceConfig": {"maxTokens": 0}}),
            "inferenceConfig.maxTokens",
        ),
    ] {
        let (status, kind, message) = error_of(post(&base, HAIKU, "converse", &body).await).await;
        assert_eq!((status, kind.as_str()), (400, "ValidationException"), "{body}");
        assert!(message.contains(needle), "{message}");
    }
    let resp = reqwest::Client::new()
        .post(format!("{base}/model/{HAIKU}/converse"))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(resp).await.1, "SerializationException");
}

#[tokio::test]
async fn model_name_faults_are_bedrock_errors() {
    let base = start(MockOptions::default()).await;
    let body = json!({"messages": [user("hi")]});
    for (model, status, kind) in [
        ("fail-429", 429, "ThrottlingException"),
        ("fail-503", 503, "ServiceUnavailableException"),
        ("fail-400", 400, "ValidationException"),
        ("fail-403", 403, "AccessDeniedException"),
        ("fail-500", 500, "InternalServerException"),
    ] {
        for operation in ["converse", "converse-stream"] {
            let (got_status, got_kind, _) = error_of(post(&base, model, operation, &body).await).await;
            assert_eq!((got_status, got_kind.as_str()), (status, kind), "{model} {operation}");
        }
    }

    // ratelimit-<n>: n text deltas, then a throttlingException frame.
    let frames = stream(&base, "ratelimit-2", &json!({"messages": [user("one two three")]})).await;
    assert_eq!(
        names(&frames),
        [
            "messageStart",
            "contentBlockDelta",
            "contentBlockDelta",
            "throttlingException"
        ]
    );
    assert_eq!(frames[3].0, "exception");
    assert!(frames[3].2["message"].as_str().unwrap().contains("Too many tokens"));

    // cut-<n>: n text deltas, then the connection drops.
    let resp = post(
        &base,
        "cut-2",
        "converse-stream",
        &json!({"messages": [user("one two three")]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.is_err(), "a cut stream must not end cleanly");

    // eof-<n>: n text deltas in whole frames, then a clean end without messageStop.
    let frames = stream(&base, "eof-2", &json!({"messages": [user("one two three")]})).await;
    assert_eq!(
        names(&frames),
        ["messageStart", "contentBlockDelta", "contentBlockDelta"]
    );
}

#[tokio::test]
async fn sigv4_authorization_is_required_with_an_api_key() {
    let base = start(MockOptions {
        require_api_key: Some("AKIDMOCK:secret".into()),
        ..Default::default()
    })
    .await;
    let url = format!("{base}/model/{HAIKU}/converse");
    let body = json!({"messages": [user("hi")]});
    let http = reqwest::Client::new();
    let send = |authorization: Option<&'static str>| {
        let mut request = http.post(&url).json(&body);
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.send()
    };
    let signed = "AWS4-HMAC-SHA256 Credential=AKIDMOCK/20261123/us-east-1/bedrock/aws4_request, \
                  SignedHeaders=content-type;host;x-amz-date, Signature=00";
    assert_eq!(send(Some(signed)).await.unwrap().status(), 200);
    let (status, kind, _) = error_of(send(None).await.unwrap()).await;
    assert_eq!((status, kind.as_str()), (403, "MissingAuthenticationTokenException"));
    let (status, kind, _) = error_of(send(Some("Bearer AKIDMOCK:secret")).await.unwrap()).await;
    assert_eq!((status, kind.as_str()), (403, "UnrecognizedClientException"));
    let other = "AWS4-HMAC-SHA256 Credential=AKIDOTHER/20261123/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=00";
    let (status, kind, _) = error_of(send(Some(other)).await.unwrap()).await;
    assert_eq!((status, kind.as_str()), (403, "UnrecognizedClientException"));
}
