//! Calling the control plane: raw JSON-RPC, extension methods, SendMessage,
//! sign-ups and data-plane chats.

use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};

pub const EXTRA: &str = "[control_plane]\nsignup_per_minute = 1000\n";

pub async fn gateway() -> Gateway {
    let mock = start_mock(Default::default()).await;
    Gateway::start(&standard_config(mock, EXTRA)).await
}

/// POSTs one JSON-RPC body to /a2a with `A2A-Version: 1.0`; returns (status, body).
pub async fn post(gateway: &Gateway, key: Option<&str>, body: &Value) -> (u16, Value) {
    let mut request = gateway
        .http
        .post(format!("{}/a2a", gateway.url))
        .header("A2A-Version", "1.0")
        .json(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// An operation error as (reason, message), from either path.
pub type OpResult = Result<Value, (String, String)>;

pub fn rpc_error(error: &Value) -> (String, String) {
    let info = &error["data"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo", "{error}");
    assert!(info["domain"].is_string(), "{error}");
    (
        info["reason"].as_str().unwrap().to_string(),
        error["message"].as_str().unwrap().to_string(),
    )
}

/// The extension method `{category}/{action}`.
pub async fn method(gateway: &Gateway, key: Option<&str>, op: &str, params: Value) -> OpResult {
    let name = op.replacen('.', "/", 1);
    let (status, body) = post(
        gateway,
        key,
        &json!({"jsonrpc": "2.0", "id": 7, "method": name, "params": params}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], 7);
    match body.get("result") {
        Some(result) => Ok(result.clone()),
        None => Err(rpc_error(&body["error"])),
    }
}

/// The same op through SendMessage; returns the data artifact or the FAILED
/// task's structured error.
pub async fn send(gateway: &Gateway, key: Option<&str>, op: &str, params: Value) -> OpResult {
    let message = json!({
        "messageId": uuid_like(), "role": "ROLE_USER",
        "parts": [{"data": {"op": op, "params": params}, "mediaType": "application/json"}],
    });
    let (status, body) = post(
        gateway,
        key,
        &json!({"jsonrpc": "2.0", "id": "s", "method": "SendMessage", "params": {"message": message}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    if let Some(error) = body.get("error") {
        // Only params that fail validation answer outside a task.
        let (reason, message) = rpc_error(error);
        assert_eq!(reason, "INVALID_PARAMS", "{body}");
        return Err((reason, message));
    }
    let task = &body["result"]["task"];
    assert!(task["id"].as_str().unwrap().starts_with("task_"), "{body}");
    match task["status"]["state"].as_str().unwrap() {
        "TASK_STATE_COMPLETED" => {
            let part = &task["artifacts"][0]["parts"][0];
            assert_eq!(part["mediaType"], "application/json");
            Ok(part["data"].clone())
        }
        "TASK_STATE_FAILED" => {
            let error = &task["status"]["message"]["parts"][0]["data"]["error"];
            assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
            Err((
                error["reason"].as_str().unwrap().to_string(),
                error["message"].as_str().unwrap().to_string(),
            ))
        }
        other => panic!("unexpected state {other}: {body}"),
    }
}

pub fn uuid_like() -> String {
    format!("m-{}", rand_suffix())
}

pub fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

pub struct User {
    pub key: String,
    pub user_id: String,
    pub workspace_id: String,
}

pub async fn signup(gateway: &Gateway, email: &str) -> User {
    let created = method(gateway, None, "accounts.signup", json!({"name": email, "email": email}))
        .await
        .unwrap();
    User {
        key: created["api_key"].as_str().unwrap().into(),
        user_id: created["user_id"].as_str().unwrap().into(),
        workspace_id: created["workspace_id"].as_str().unwrap().into(),
    }
}

/// Replaces generated values (ids, secrets, times) by their order of first
/// appearance, so two runs of the same script compare equal.
pub async fn chat_with(gateway: &Gateway, key: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = gateway
        .http
        .post(format!("{}/v1/chat/completions", gateway.url))
        .bearer_auth(key)
        .json(&json!({"model": "mock/small", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap_or(Value::Null))
}

pub async fn raw(gateway: &Gateway, version: Option<&str>, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let mut request = gateway
        .http
        .post(format!("{}/a2a", gateway.url))
        .bearer_auth(&gateway.api_key)
        .header("content-type", "application/json")
        .body(body);
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub fn code(body: &Value) -> i64 {
    rpc_error(&body["error"]);
    body["error"]["code"].as_i64().unwrap()
}
