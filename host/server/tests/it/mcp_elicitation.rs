//! Elicitation over MCP (tool WIT 0.3.0), against the real binary: the
//! conformance fixture's `test_elicitation` asks its question on the call's
//! SSE answer, the client's reply is POSTed separately (here to another
//! gateway on the same database) and the call resumes with it. A reply from
//! another workspace's key, from another session, without a session, too
//! large or malformed is refused with a JSON-RPC error while the question
//! keeps waiting; an unanswered question ends the call at
//! `components.elicitation_timeout_ms` with the gateway still serving, and
//! one whose client went away is dropped at once; a client that did not
//! declare the capability is never asked.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{Gateway, admin, standard_config, start_mock};
use crate::mcp_catalog::publish_fixture;

const SESSION: &str = "mcp-session-id";
const TIMEOUT_MS: u64 = 3_000;
const PATH: &str = "/v1/mcp/fx";

async fn post(gateway: &Gateway, key: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    post_to(gateway, PATH, key, session, body).await
}

async fn post_to(gateway: &Gateway, path: &str, key: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut request = gateway
        .http
        .post(format!("{}{path}", gateway.url))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(session) = session {
        request = request.header(SESSION, session);
    }
    request.send().await.unwrap()
}

/// A session for `key` on `path`, whose client declares `capabilities`.
async fn open_session_on(gateway: &Gateway, path: &str, key: &str, capabilities: Value) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "test", "version": "1"}}});
    let response = post_to(gateway, path, key, None, &initialize).await;
    assert_eq!(response.status(), StatusCode::OK);
    response.headers()[SESSION].to_str().unwrap().to_string()
}

async fn open_session(gateway: &Gateway, key: &str, capabilities: Value) -> String {
    open_session_on(gateway, PATH, key, capabilities).await
}

/// An SSE answer read event by event.
struct Events {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Events {
    fn of(response: reqwest::Response) -> Self {
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event's JSON-RPC message; `None` when the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data = event.lines().find_map(|line| line.strip_prefix("data: "))?;
                return Some(serde_json::from_str(data).unwrap());
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.body.next())
                .await
                .expect("the stream went quiet")?
                .unwrap();
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

fn call(id: u64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "test_elicitation", "arguments": {"message": message}}})
}

fn reply(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A refusal: the status, and a JSON-RPC error of `code` whose message says `says`.
async fn assert_refused(response: reqwest::Response, status: StatusCode, code: i64, says: &str) {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(says), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_question_goes_to_its_session_and_the_call_resumes_with_the_reply() {
    let mock = start_mock(Default::default()).await;
    let config = standard_config(mock, &format!("[components]\nelicitation_timeout_ms = {TIMEOUT_MS}\n"));
    let gateway = Gateway::start(&config).await;
    publish_fixture(&gateway).await;
    let key = gateway.api_key.clone();
    let session = open_session(&gateway, &key, json!({"elicitation": {}})).await;

    // The question arrives on the call's SSE answer, as the tool put it.
    let mut events = Events::of(post(&gateway, &key, Some(&session), &call(7, "Who are you?")).await);
    let question = events.next().await.unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "Who are you?");
    assert_eq!(
        question["params"]["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    let id = question["id"].clone();
    let accept = reply(
        &id,
        json!({"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}),
    );

    // Another workspace's key cannot name the session, nor answer from its
    // own (on `/v1/mcp`: it has no `fx` install).
    let stranger = admin(
        &gateway.config_path,
        &["create-account", "--name", "stranger", "--credit-usd", "5", "--json"],
    );
    let stranger: Value = serde_json::from_str(&stranger).unwrap();
    let stranger = stranger["api_key"].as_str().unwrap();
    let response = post_to(&gateway, "/v1/mcp", stranger, Some(&session), &accept).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let theirs = open_session_on(&gateway, "/v1/mcp", stranger, json!({"elicitation": {}})).await;
    let response = post_to(&gateway, "/v1/mcp", stranger, Some(&theirs), &accept).await;
    assert_refused(response, StatusCode::BAD_REQUEST, -32600, "no question with this id").await;
    // Nor can a reply without the session that was asked.
    let response = post(&gateway, &key, None, &accept).await;
    assert_refused(response, StatusCode::BAD_REQUEST, -32600, SESSION).await;

    // Too large, or not an answer MCP allows: refused, and the question waits on.
    let huge = reply(
        &id,
        json!({"action": "accept", "content": {"username": "x".repeat(70_000)}}),
    );
    let response = post(&gateway, &key, Some(&session), &huge).await;
    assert_refused(response, StatusCode::PAYLOAD_TOO_LARGE, -32600, "at most 65536 bytes").await;
    for malformed in [
        json!({"action": "maybe"}),
        json!({"action": "accept", "content": {"username": {"nested": true}}}),
    ] {
        let response = post(&gateway, &key, Some(&session), &reply(&id, malformed)).await;
        assert_refused(response, StatusCode::BAD_REQUEST, -32602, "result.").await;
    }

    // The real answer, POSTed to another gateway of the cluster: the call,
    // waiting on the first, finds it in the database and resumes.
    let beside = gateway.another().await;
    let response = post(&beside, &key, Some(&session), &accept).await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let result = events.next().await.unwrap();
    assert_eq!(result["id"], 7, "{result}");
    assert_eq!(result["result"]["isError"], false, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("User response: action=accept, content="), "{text}");
    assert!(text.contains("ada@example.com"), "{text}");
    assert!(events.next().await.is_none(), "the result ends the stream");
    // Answered once: a second answer finds nothing waiting.
    let response = post(&gateway, &key, Some(&session), &accept).await;
    assert_refused(response, StatusCode::BAD_REQUEST, -32600, "no question with this id").await;
    drop(beside);

    // A question never answered ends the call at the timeout, as a tool
    // error the tool wrote from `timed-out`; the gateway serves on.
    let started = Instant::now();
    let mut events = Events::of(post(&gateway, &key, Some(&session), &call(8, "Still there?")).await);
    let question = events.next().await.unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let result = events.next().await.unwrap();
    let waited = started.elapsed();
    assert_eq!(result["id"], 8, "{result}");
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("did not answer in time"),
        "{result}"
    );
    assert!(
        waited >= Duration::from_millis(TIMEOUT_MS) && waited < Duration::from_millis(TIMEOUT_MS + 10_000),
        "{waited:?}"
    );
    let late = reply(&question["id"], json!({"action": "cancel"}));
    let response = post(&gateway, &key, Some(&session), &late).await;
    assert_refused(response, StatusCode::BAD_REQUEST, -32600, "no question with this id").await;
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    assert_eq!(
        post(&gateway, &key, Some(&session), &ping).await.status(),
        StatusCode::OK
    );

    // A client that goes away while asked: the question is dropped at
    // once (a reply finds nothing waiting), not at the timeout.
    let mut events = Events::of(post(&gateway, &key, Some(&session), &call(11, "Gone?")).await);
    let question = events.next().await.unwrap();
    drop(events);
    tokio::time::sleep(Duration::from_millis(TIMEOUT_MS / 3)).await;
    let late = reply(&question["id"], json!({"action": "decline"}));
    let response = post(&gateway, &key, Some(&session), &late).await;
    assert_refused(response, StatusCode::BAD_REQUEST, -32600, "no question with this id").await;

    // A client that did not declare the capability is never asked: the
    // tool learns why at once, and the call answers plain JSON.
    let plain = open_session(&gateway, &key, json!({})).await;
    let response = post(&gateway, &key, Some(&plain), &call(10, "Hello?")).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("elicitation capability"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_keeps_at_most_its_cap_of_questions_waiting() {
    // A waiting question holds a sandbox slot and a thread: a tenant that
    // never answers must not take them all.
    let mock = start_mock(Default::default()).await;
    let config = standard_config(
        mock,
        "[components]\nelicitation_timeout_ms = 30000\nmax_waiting_elicitations = 1\n",
    );
    let gateway = Gateway::start(&config).await;
    publish_fixture(&gateway).await;
    let key = gateway.api_key.clone();
    let session = open_session(&gateway, &key, json!({"elicitation": {}})).await;

    let mut first = Events::of(post(&gateway, &key, Some(&session), &call(1, "First?")).await);
    let question = first.next().await.unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");

    // One is waiting: the next question fails at once, and the tool says why.
    let started = Instant::now();
    let response = post(&gateway, &key, Some(&session), &call(2, "Second?")).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "refused at once");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("max_waiting_elicitations"), "{text}");

    // Answered, the first gives its place back: the next question is asked.
    let decline = reply(&question["id"], json!({"action": "decline"}));
    let response = post(&gateway, &key, Some(&session), &decline).await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(first.next().await.unwrap()["id"], 1);
    let mut third = Events::of(post(&gateway, &key, Some(&session), &call(3, "Third?")).await);
    let asked = third.next().await.unwrap();
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
}
