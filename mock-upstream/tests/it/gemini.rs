//! The Gemini routes: `…/models/{model}:generateContent` and
//! `:streamGenerateContent`, answered like the OpenAI route (same text, tool
//! arguments, token counts and faults) in Gemini's shapes, with Google's
//! validation, error bodies and `x-goog-api-key` auth.

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tollgate_mock_upstream::{MockOptions, serve};

async fn start(opts: MockOptions) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, opts));
    format!("http://{addr}")
}

fn user(text: &str) -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": text}]}]})
}

async fn post(base: &str, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn generate(base: &str, model: &str, body: &Value) -> (u16, Value) {
    let resp = post(base, &format!("/v1beta/models/{model}:generateContent"), body).await;
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// The `data:` payloads of an SSE body, checking Gemini's CRLF framing.
fn sse_events(text: &str) -> Vec<Value> {
    assert!(text.ends_with("\r\n\r\n"), "{text:?}");
    text.split("\r\n\r\n")
        .filter(|frame| !frame.is_empty())
        .map(|frame| serde_json::from_str(frame.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

fn text_of(event: &Value) -> String {
    event["candidates"][0]["content"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

#[tokio::test]
async fn generate_content_answers_like_the_openai_route() {
    let base = start(MockOptions::default()).await;
    let body = json!({
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "hello gemini"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]}],
        "generationConfig": {"temperature": 0.5, "maxOutputTokens": 100}
    });
    let (status, answer) = generate(&base, "gemini-2.5-flash", &body).await;
    assert_eq!(status, 200, "{answer}");
    let candidate = &answer["candidates"][0];
    assert_eq!(text_of(&answer), "You said: hello gemini");
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(candidate["content"]["role"], "model");
    assert_eq!(answer["modelVersion"], "gemini-2.5-flash");
    assert!(answer["responseId"].as_str().unwrap().starts_with("mock-gemini-"));

    let openai: Value = post(
        &base,
        "/v1/chat/completions",
        &json!({"model": "gemini-2.5-flash", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello gemini"}
        ]}),
    )
    .await
    .json()
    .await
    .unwrap();
    let usage = &answer["usageMetadata"];
    assert_eq!(usage["promptTokenCount"], openai["usage"]["prompt_tokens"]);
    assert_eq!(usage["candidatesTokenCount"], openai["usage"]["completion_tokens"]);
    assert_eq!(usage["totalTokenCount"], openai["usage"]["total_tokens"]);
    assert_eq!(usage["promptTokenCount"], 2 + 4 + 2 + 4);
}

#[tokio::test]
async fn v1_path_and_recorder() {
    let base = start(MockOptions::default()).await;
    let resp = post(&base, "/v1/models/gemini-2.0-flash:generateContent", &user("hi")).await;
    assert_eq!(resp.status(), 200);
    let recorded: Value = reqwest::get(format!("{base}/__mock/requests"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = recorded.as_array().unwrap().last().unwrap();
    assert_eq!(last["path"], "/v1/models/gemini-2.0-flash:generateContent");
    assert_eq!(last["body"], user("hi"));
}

#[tokio::test]
async fn streams_one_event_per_word_over_sse() {
    let base = start(MockOptions::default()).await;
    let resp = post(
        &base,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        &user("one two three"),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = sse_events(&resp.text().await.unwrap());
    assert_eq!(events.len(), 5, "{events:?}");
    let text: String = events.iter().map(text_of).collect();
    assert_eq!(text, "You said: one two three");
    let last = events.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 5);
    assert_eq!(last["usageMetadata"]["promptTokenCount"], 7);
    assert!(
        events[..4]
            .iter()
            .all(|e| e["candidates"][0].get("finishReason").is_none())
    );
    assert_eq!(events[1]["usageMetadata"]["candidatesTokenCount"], 2);
    let ids: Vec<&Value> = events.iter().map(|e| &e["responseId"]).collect();
    assert!(ids.iter().all(|id| *id == ids[0]));

    // Without alt=sse, the same events come as one JSON array.
    let resp = post(&base, "/v1beta/models/m:streamGenerateContent", &user("one two three")).await;
    let array: Value = resp.json().await.unwrap();
    assert_eq!(array.as_array().unwrap().len(), 5);
}

fn weather_tools() -> Value {
    json!([{"functionDeclarations": [
        {"name": "get_weather", "description": "Weather",
         "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}, "days": {"type": "INTEGER"}}, "required": ["city"]}},
        {"name": "get_time"}
    ]}])
}

#[tokio::test]
async fn function_calls_and_results() {
    let base = start(MockOptions::default()).await;
    let mut body = user("weather in Paris?");
    body["tools"] = weather_tools();
    let (status, answer) = generate(&base, "m", &body).await;
    assert_eq!(status, 200, "{answer}");
    let part = &answer["candidates"][0]["content"]["parts"][0];
    assert_eq!(
        part["functionCall"],
        json!({"name": "get_weather", "args": {"city": "mock", "days": 1}})
    );
    assert_eq!(answer["candidates"][0]["finishReason"], "STOP");
    // Tokens: words of the arguments JSON text, as on the OpenAI route.
    assert_eq!(answer["usageMetadata"]["candidatesTokenCount"], 1);

    body["toolConfig"] = json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_time"]}});
    let (_, answer) = generate(&base, "m", &body).await;
    assert_eq!(
        answer["candidates"][0]["content"]["parts"][0]["functionCall"],
        json!({"name": "get_time", "args": {}})
    );

    body["toolConfig"] = json!({"functionCallingConfig": {"mode": "NONE"}});
    let (_, answer) = generate(&base, "m", &body).await;
    assert_eq!(text_of(&answer), "You said: weather in Paris?");

    let follow_up = json!({
        "contents": [
            {"role": "user", "parts": [{"text": "weather in Paris?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}}]}
        ],
        "tools": weather_tools()
    });
    let (status, answer) = generate(&base, "m", &follow_up).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(text_of(&answer), "Tool result: sunny");
    assert_eq!(answer["usageMetadata"]["promptTokenCount"], 3 + 4 + 4 + 1 + 4);

    // Streamed, the call arrives whole in one event.
    let resp = post(
        &base,
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        &body_with_tools(),
    )
    .await;
    let events = sse_events(&resp.text().await.unwrap());
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0]["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "get_weather"
    );
    assert_eq!(events[0]["candidates"][0]["finishReason"], "STOP");
}

fn body_with_tools() -> Value {
    let mut body = user("weather?");
    body["tools"] = weather_tools();
    body
}

#[tokio::test]
async fn json_output() {
    let base = start(MockOptions::default()).await;
    let mut body = user("Ada, 36");
    body["generationConfig"] = json!({
        "responseMimeType": "application/json",
        "responseSchema": {"type": "OBJECT", "properties": {"name": {"type": "STRING"}, "age": {"type": "INTEGER"}}, "required": ["name", "age"]}
    });
    let (status, answer) = generate(&base, "m", &body).await;
    assert_eq!(status, 200, "{answer}");
    let parsed: Value = serde_json::from_str(&text_of(&answer)).unwrap();
    assert_eq!(parsed, json!({"name": "mock", "age": 1}));

    body["generationConfig"] = json!({"responseMimeType": "application/json"});
    let (_, answer) = generate(&base, "m", &body).await;
    let parsed: Value = serde_json::from_str(&text_of(&answer)).unwrap();
    assert_eq!(parsed, json!({"reply": "You said: Ada, 36"}));

    body["generationConfig"] = json!({
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "additionalProperties": false}
    });
    let (status, answer) = generate(&base, "m", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        serde_json::from_str::<Value>(&text_of(&answer)).unwrap(),
        json!({"ok": true})
    );
}

#[tokio::test]
async fn continues_a_trailing_model_turn() {
    let base = start(MockOptions::default()).await;
    let body = json!({"contents": [
        {"role": "user", "parts": [{"text": "hello there"}]},
        {"role": "model", "parts": [{"text": "You said:"}]}
    ]});
    let (_, answer) = generate(&base, "m", &body).await;
    assert_eq!(text_of(&answer), " hello there");
}

async fn expect_invalid(base: &str, path: &str, body: &Value, needle: &str) {
    let resp = post(base, path, body).await;
    let status = resp.status().as_u16();
    let error: Value = resp.json().await.unwrap();
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], 400);
    assert_eq!(error["error"]["status"], "INVALID_ARGUMENT");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}

#[tokio::test]
async fn validates_like_gemini() {
    let base = start(MockOptions::default()).await;
    let path = "/v1beta/models/m:generateContent";
    let mut unknown = user("x");
    unknown["messages"] = json!([]);
    expect_invalid(&base, path, &unknown, "Unknown name \"messages\": Cannot find field.").await;
    expect_invalid(&base, path, &json!({}), "contents is not specified").await;
    expect_invalid(&base, path, &json!({"contents": []}), "contents is not specified").await;
    let bad_role = json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]});
    expect_invalid(&base, path, &bad_role, "Please use a valid role: user, model.").await;
    let empty = json!({"contents": [{"role": "user", "parts": []}]});
    expect_invalid(
        &base,
        path,
        &empty,
        "contents[0].parts: contents.parts must not be empty",
    )
    .await;
    let two = json!({"contents": [{"role": "user", "parts": [{"text": "x", "inlineData": {"mimeType": "a/b", "data": "AA=="}}]}]});
    expect_invalid(&base, path, &two, "Oneof field 'data' is already set").await;

    let mut schema = user("x");
    schema["tools"] = json!([{"functionDeclarations": [{"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}}]}]);
    expect_invalid(
        &base,
        path,
        &schema,
        "Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0].parameters': Cannot find field.",
    )
    .await;
    schema["tools"] =
        json!([{"functionDeclarations": [{"name": "f", "parameters": {"type": "object", "properties": {}}}]}]);
    expect_invalid(&base, path, &schema, "should be non-empty for OBJECT type").await;
    schema["tools"] = json!([{"functionDeclarations": [{"name": "1f"}]}]);
    expect_invalid(&base, path, &schema, "Invalid function name").await;

    let mut config = user("x");
    // Names are camel-cased before validation, so an unknown snake_case name is
    // reported camel-cased (Gemini itself echoes the spelling it was sent).
    config["generationConfig"] = json!({"max_tokens": 5});
    expect_invalid(
        &base,
        path,
        &config,
        "Unknown name \"maxTokens\" at 'generation_config'",
    )
    .await;
    config["generationConfig"] = json!({"responseSchema": {"type": "object", "properties": {"a": {"type": "string"}}}});
    expect_invalid(&base, path, &config, "response_mime_type").await;
    config["generationConfig"] = json!({"temperature": 3});
    expect_invalid(&base, path, &config, "temperature").await;

    let resp = post(&base, "/v1beta/models/m:embedContent", &user("x")).await;
    assert_eq!(resp.status(), 404);
    let error: Value = resp.json().await.unwrap();
    assert_eq!(error["error"]["status"], "NOT_FOUND");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not supported for embedContent")
    );
}

#[tokio::test]
async fn model_name_faults_use_google_errors() {
    let base = start(MockOptions::default()).await;
    for (model, code, status) in [
        ("fail-429", 429, "RESOURCE_EXHAUSTED"),
        ("fail-503", 503, "UNAVAILABLE"),
        ("fail-500", 500, "INTERNAL"),
        ("fail-401", 401, "UNAUTHENTICATED"),
    ] {
        let (got, error) = generate(&base, model, &user("x")).await;
        assert_eq!(got, code, "{model}");
        assert_eq!(error["error"]["code"], code);
        assert_eq!(error["error"]["status"], status);
    }

    let mut body = user("x");
    body["mock"] = json!({"status": 400, "error_code": "context_length_exceeded"});
    let (got, error) = generate(&base, "m", &body).await;
    assert_eq!(got, 400);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds the maximum number of tokens")
    );

    body["mock"] = json!({"status": 429, "retry_after": 7});
    let resp = post(&base, "/v1beta/models/m:generateContent", &body).await;
    assert_eq!(resp.headers()["retry-after"], "7");
    let error: Value = resp.json().await.unwrap();
    assert_eq!(error["error"]["details"][0]["retryDelay"], "7s");

    let started = std::time::Instant::now();
    let (got, _) = generate(&base, "slow-60", &user("x")).await;
    assert_eq!(got, 200);
    assert!(started.elapsed() >= std::time::Duration::from_millis(60));
}

#[tokio::test]
async fn stream_faults() {
    let base = start(MockOptions::default()).await;
    let resp = post(
        &base,
        "/v1beta/models/ratelimit-2:streamGenerateContent?alt=sse",
        &user("a b c d"),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let events = sse_events(&resp.text().await.unwrap());
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(text_of(&events[0]) + &text_of(&events[1]), "You said:");
    assert_eq!(events[2]["error"]["code"], 429);
    assert_eq!(events[2]["error"]["status"], "RESOURCE_EXHAUSTED");

    let resp = post(
        &base,
        "/v1beta/models/cut-2:streamGenerateContent?alt=sse",
        &user("a b c d"),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut resp = resp;
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
    assert_eq!(text.matches("data: ").count(), 2, "{text}");

    // eof-<n>: n events, then a clean end; none carries a finishReason.
    let resp = post(
        &base,
        "/v1beta/models/eof-2:streamGenerateContent?alt=sse",
        &user("a b c d"),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let events = sse_events(&resp.text().await.unwrap());
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events.iter().all(|e| e["candidates"][0].get("finishReason").is_none()),
        "{events:?}"
    );
}

#[tokio::test]
async fn api_key_auth() {
    let base = start(MockOptions {
        require_api_key: Some("k1".into()),
        ..Default::default()
    })
    .await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1beta/models/m:generateContent");
    let ok = http
        .post(&url)
        .header("x-goog-api-key", "k1")
        .json(&user("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let ok = http
        .post(format!("{url}?key=k1"))
        .json(&user("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);

    let wrong = http
        .post(&url)
        .header("x-goog-api-key", "k2")
        .json(&user("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 400);
    let error: Value = wrong.json().await.unwrap();
    assert_eq!(error["error"]["details"][0]["reason"], "API_KEY_INVALID");

    let none = http.post(&url).json(&user("x")).send().await.unwrap();
    assert_eq!(none.status(), 403);
    let error: Value = none.json().await.unwrap();
    assert_eq!(error["error"]["status"], "PERMISSION_DENIED");

    let bearer = http.post(&url).bearer_auth("k1").json(&user("x")).send().await.unwrap();
    assert_eq!(bearer.status(), 401);
    let error: Value = bearer.json().await.unwrap();
    assert_eq!(error["error"]["status"], "UNAUTHENTICATED");
}
