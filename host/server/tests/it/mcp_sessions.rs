//! MCP sessions (`Mcp-Session-Id`) on `/v1/mcp`: opened by `initialize`,
//! holding the client's log level, served by any gateway on the database
//! and after a restart, ended by `DELETE`, and never usable by another
//! workspace. A loopback gateway refuses a rebound `Host`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{Gateway, admin, standard_config, start_mock};

const SESSION: &str = "mcp-session-id";

async fn post(gateway: &Gateway, key: &str, session: Option<&str>, body: Value) -> reqwest::Response {
    let mut request = gateway
        .http
        .post(format!("{}/v1/mcp", gateway.url))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(session) = session {
        request = request.header(SESSION, session);
    }
    request.send().await.unwrap()
}

fn set_level(level: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": level}})
}

#[tokio::test]
async fn a_session_opens_holds_its_level_follows_the_database_and_ends() {
    let mock = start_mock(Default::default()).await;
    let mut gateway = Gateway::start(&standard_config(mock, "")).await;
    let key = gateway.api_key.clone();

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}});
    let response = post(&gateway, &key, None, initialize.clone()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let session = response.headers()[SESSION].to_str().unwrap().to_string();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["protocolVersion"], "2025-06-18", "{body}");
    assert_eq!(body["result"]["capabilities"]["logging"], json!({}), "{body}");
    assert!(session.len() >= 40, "an unguessable id: {session}");
    // Each initialize opens a session of its own.
    let other = post(&gateway, &key, None, initialize.clone()).await;
    assert_ne!(other.headers()[SESSION].to_str().unwrap(), session);

    // The level needs a session, and a known level.
    let body: Value = post(&gateway, &key, None, set_level("info"))
        .await
        .json()
        .await
        .unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains(SESSION), "{body}");
    let body: Value = post(&gateway, &key, Some(&session), set_level("loud"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let body: Value = post(&gateway, &key, Some(&session), set_level("warning"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["result"], json!({}), "{body}");

    // Another gateway on the same database, and this one restarted, serve it.
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    let beside = gateway.another().await;
    assert_eq!(
        post(&beside, &key, Some(&session), ping.clone()).await.status(),
        StatusCode::OK
    );
    drop(beside);
    gateway.kill();
    let gateway = gateway.restart().await;
    assert_eq!(
        post(&gateway, &key, Some(&session), ping.clone()).await.status(),
        StatusCode::OK
    );

    // Another workspace's key cannot use it, nor end it.
    let stranger = admin(
        &gateway.config_path,
        &["create-account", "--name", "stranger", "--credit-usd", "5", "--json"],
    );
    let stranger: Value = serde_json::from_str(&stranger).unwrap();
    let stranger = stranger["api_key"].as_str().unwrap();
    let response = post(&gateway, stranger, Some(&session), ping.clone()).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let delete = |key: &str, session: Option<&str>| {
        let mut request = gateway.http.delete(format!("{}/v1/mcp", gateway.url)).bearer_auth(key);
        if let Some(session) = session {
            request = request.header(SESSION, session);
        }
        request.send()
    };
    assert_eq!(
        delete(stranger, Some(&session)).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );

    // DELETE ends it: later requests naming it get 404, so the client
    // initializes again; a request naming no session is still served.
    assert_eq!(delete(&key, None).await.unwrap().status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        delete(&key, Some(&session)).await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        delete(&key, Some(&session)).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    let response = post(&gateway, &key, Some(&session), ping.clone()).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"].as_str().unwrap().contains("initialize"),
        "{body}"
    );
    let response = post(&gateway, &key, Some("made-up"), ping.clone()).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(post(&gateway, &key, None, ping.clone()).await.status(), StatusCode::OK);

    // initialize is not allowed inside a batch.
    let response = post(&gateway, &key, None, json!([initialize])).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body[0]["error"]["code"], -32600, "{body}");
}

#[tokio::test]
async fn a_loopback_gateway_refuses_a_rebound_host() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let port = gateway.url.rsplit(':').next().unwrap().to_string();
    for (host, status) in [
        ("evil.example.com".to_string(), StatusCode::FORBIDDEN),
        (format!("evil.example.com:{port}"), StatusCode::FORBIDDEN),
        (format!("localhost:{port}"), StatusCode::OK),
        (format!("127.0.0.1:{port}"), StatusCode::OK),
    ] {
        let response = gateway
            .http
            .post(format!("{}/v1/mcp", gateway.url))
            .bearer_auth(&gateway.api_key)
            .header("host", &host)
            .header("origin", format!("http://{host}"))
            .json(&ping)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "Host {host}");
    }
}
