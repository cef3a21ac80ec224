//! The Azure OpenAI deployment route: api-version required, deployment as the
//! model, `api-key` auth, body recorded as sent.

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tollgate_mock_upstream::{MockOptions, serve};

async fn start(opts: MockOptions) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, opts));
    format!("http://{addr}")
}

fn body() -> Value {
    json!({"messages": [{"role": "user", "content": "hello azure"}]})
}

#[tokio::test]
async fn deployment_route_answers_with_the_deployment_as_model() {
    let base = start(MockOptions::default()).await;
    let http = reqwest::Client::new();
    let url = format!("{base}/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21");
    let resp = http.post(&url).json(&body()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["model"], "gpt-4o-prod");
    assert_eq!(answer["choices"][0]["message"]["content"], "You said: hello azure");

    let recorded: Value = http
        .get(format!("{base}/__mock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = recorded.as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["body"],
        body(),
        "the body is recorded as sent, without the injected model"
    );
    assert!(
        last["path"].as_str().unwrap().contains("api-version=2024-10-21"),
        "{last}"
    );
}

#[tokio::test]
async fn api_version_is_required() {
    let base = start(MockOptions::default()).await;
    let resp = reqwest::Client::new()
        .post(format!("{base}/openai/deployments/d/chat/completions"))
        .json(&body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let error: Value = resp.json().await.unwrap();
    assert_eq!(error["error"]["code"], "MissingApiVersionParameter");
}

#[tokio::test]
async fn api_key_header_is_the_credential() {
    let base = start(MockOptions {
        require_api_key: Some("k1".into()),
        ..Default::default()
    })
    .await;
    let http = reqwest::Client::new();
    let url = format!("{base}/openai/deployments/d/chat/completions?api-version=2024-10-21");
    let ok = http
        .post(&url)
        .header("api-key", "k1")
        .json(&body())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let bearer = http.post(&url).bearer_auth("k1").json(&body()).send().await.unwrap();
    assert_eq!(bearer.status(), 401);
    let wrong = http
        .post(&url)
        .header("api-key", "k2")
        .json(&body())
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
}

#[tokio::test]
async fn model_name_faults_work_on_deployments() {
    let base = start(MockOptions::default()).await;
    let resp = reqwest::Client::new()
        .post(format!(
            "{base}/openai/deployments/fail-429/chat/completions?api-version=2024-10-21"
        ))
        .json(&body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);

    // eof-<n> on a deployment: n content chunks, then a clean end without a
    // finish_reason or [DONE].
    let mut streamed = body();
    streamed["stream"] = json!(true);
    let text = reqwest::Client::new()
        .post(format!(
            "{base}/openai/deployments/eof-2/chat/completions?api-version=2024-10-21"
        ))
        .json(&streamed)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text.matches("data: ").count(), 3, "{text}");
    assert!(
        !text.contains("[DONE]") && !text.contains("\"finish_reason\":\""),
        "{text}"
    );
}
