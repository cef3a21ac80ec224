//! Tenant boundaries a hostile caller probes, against the real binary: the
//! `WWW-Authenticate` challenge on every 401, browser origins on `/v1/mcp`
//! and the A2A endpoints, MCP batches counted entry by entry, private actors
//! (IR, blobs, agent card) hidden from other tenants, and the per-deployment
//! A2A endpoint answering errors as the control plane does.

use serde_json::{Value, json};

use crate::common::{Gateway, admin, standard_config, start_mock};
use crate::control_plane::helpers::method;

const GREETER: &str = r#"
apiVersion: tollgate.dev/v1
kind: Actor
metadata: {name: greeter, namespace: secrets, description: Greets.}
inputs:
  type: object
  properties: {name: {type: string}}
  required: [name]
models:
  default: {candidates: [mock/small], max_tokens: 16}
steps:
  - id: greet
    llm: {model: default, system: "THE-SECRET-SYSTEM-PROMPT", prompt: "Say hello to {{ input.name }}."}
  - return: "{{ steps.greet.output }}"
"#;

async fn op(gateway: &Gateway, key: &str, name: &str, params: Value) -> Value {
    method(gateway, Some(key), name, params)
        .await
        .unwrap_or_else(|e| panic!("{name} failed: {e:?}"))
}

/// A second account on the same gateway: (key, workspace id).
fn stranger(gateway: &Gateway) -> (String, String) {
    let created = admin(
        &gateway.config_path,
        &["create-account", "--name", "stranger", "--credit-usd", "5", "--json"],
    );
    let created: Value = serde_json::from_str(&created).unwrap();
    (
        created["api_key"].as_str().unwrap().into(),
        created["workspace_id"].as_str().unwrap().into(),
    )
}

fn challenge(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn every_401_carries_a_bearer_challenge() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let http = reqwest::Client::new();
    let posts = [
        (
            "/v1/chat/completions",
            "application/json",
            r#"{"model": "mock/small", "messages": []}"#,
        ),
        (
            "/v1/mcp",
            "application/json",
            r#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#,
        ),
        (
            "/v1/actors/any/thing/a2a",
            "application/json",
            r#"{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}"#,
        ),
        (
            "/a2a",
            "application/json",
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}"#,
        ),
        (
            "/v1/messages",
            "application/json",
            r#"{"model": "mock/small", "max_tokens": 5, "messages": []}"#,
        ),
    ];
    for (path, content_type, body) in posts {
        for key in [None, Some("tg_live_not_a_real_key")] {
            let mut request = http
                .post(format!("{}{path}", gateway.url))
                .header("content-type", content_type)
                .header("a2a-version", "1.0")
                .body(body);
            if let Some(key) = key {
                request = request.bearer_auth(key);
            }
            let response = request.send().await.unwrap();
            // The control plane serves anonymous discovery; only a bad key is refused there.
            if path == "/a2a" && key.is_none() {
                continue;
            }
            assert_eq!(response.status(), 401, "{path} with {key:?}");
            let challenge = challenge(&response);
            assert!(
                challenge.starts_with("Bearer realm=\"tollgate\""),
                "{path}: {challenge:?}"
            );
            assert_eq!(
                challenge.contains("error=\"invalid_token\""),
                key.is_some(),
                "{path} with {key:?}: {challenge:?}"
            );
            if path.ends_with("/a2a") {
                let body: Value = response.json().await.unwrap();
                assert_eq!(
                    body["jsonrpc"], "2.0",
                    "{path}: a JSON-RPC error, not an OpenAI body: {body}"
                );
                assert_eq!(body["error"]["data"][0]["reason"], "UNAUTHENTICATED", "{body}");
            }
        }
    }
}

#[tokio::test]
async fn mcp_refuses_foreign_origins_and_counts_a_batch_entry_by_entry() {
    let mock = start_mock(Default::default()).await;
    let extra = "[control_plane]\nallowed_origins = [\"https://console.example.com\"]\n";
    let gateway = Gateway::start(&standard_config(mock, extra)).await;
    op(
        &gateway,
        &gateway.api_key,
        "installs.create",
        json!({"package": "tollgate/calculator"}),
    )
    .await;
    let mcp = |key: String, origin: Option<&'static str>, body: Value| {
        let mut request = gateway
            .http
            .post(format!("{}/v1/mcp", gateway.url))
            .bearer_auth(key)
            .json(&body);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let key = gateway.api_key.clone();
    let own = gateway.url.clone();
    let own: &'static str = Box::leak(own.into_boxed_str());
    for (origin, status) in [
        (Some("http://evil.example.com"), 403),
        (Some("null"), 403),
        (Some("https://console.example.com"), 200),
        (Some(own), 200),
        (None, 200),
    ] {
        let response = mcp(key.clone(), origin, ping.clone()).await.unwrap();
        assert_eq!(response.status(), status, "Origin {origin:?}");
    }
    // The A2A endpoints check the same rule.
    let response = gateway
        .http
        .post(format!("{}/a2a", gateway.url))
        .header("origin", "http://evil.example.com")
        .header("a2a-version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    // More than 32 messages: refused whole.
    let call = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "calculator__evaluate", "arguments": {"expression": "6*7"}}})
    };
    let big: Vec<Value> = (0..10_000).map(call).collect();
    let response = mcp(key.clone(), None, Value::Array(big)).await.unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"].as_str().unwrap().contains("at most 32"),
        "{body}"
    );

    // A key limited to 2 requests a minute: the request counts once, each
    // further call in its batch once more.
    let limited = op(
        &gateway,
        &key,
        "keys.create",
        json!({"name": "slow", "requests_per_minute": 2}),
    )
    .await;
    let limited = limited["api_key"].as_str().unwrap().to_string();
    let batch: Vec<Value> = (1..=5).map(call).collect();
    let response = mcp(limited.clone(), None, Value::Array(batch)).await.unwrap();
    assert_eq!(response.status(), 200);
    let replies: Vec<Value> = response.json().await.unwrap();
    assert_eq!(replies.len(), 5);
    let refused: Vec<bool> = replies.iter().map(|r| r.get("error").is_some()).collect();
    assert_eq!(refused, [false, false, true, true, true], "{replies:?}");
    assert!(
        replies[2]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("rate_limited"),
        "{replies:?}"
    );
    // And the next request is over the rate at once.
    let response = mcp(limited, None, ping).await.unwrap();
    assert_eq!(response.status(), 429);
}

#[tokio::test]
async fn a_private_actor_is_invisible_to_other_tenants_and_anonymous_callers() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let owner = gateway.api_key.clone();
    op(&gateway, &owner, "namespaces.create", json!({"name": "secrets"})).await;
    let actor = op(&gateway, &owner, "actors.publish", json!({"source": GREETER})).await;
    let (id, digest, package) = (
        actor["id"].as_str().unwrap().to_string(),
        actor["digest"].as_str().unwrap().to_string(),
        actor["package"].as_str().unwrap().to_string(),
    );
    op(
        &gateway,
        &owner,
        "deployments.create",
        json!({"namespace": "secrets", "name": "greeter", "actor_id": id}),
    )
    .await;
    let (other, _) = stranger(&gateway);
    let get = |path: String, key: Option<String>| {
        let mut request = gateway.http.get(format!("{}{path}", gateway.url));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        request.send()
    };
    let private_paths = [
        format!("/v1/blobs/{digest}"),
        format!("/v1/packages/{package}"),
        format!("/v1/packages/{package}/0.1.0"),
    ];
    for path in &private_paths {
        for key in [None, Some(other.clone())] {
            let response = get(path.clone(), key.clone()).await.unwrap();
            assert_eq!(
                response.status(),
                404,
                "{path} as {}",
                if key.is_some() { "another tenant" } else { "anonymous" }
            );
            assert!(!response.text().await.unwrap().contains("THE-SECRET-SYSTEM-PROMPT"));
        }
        let response = get(path.clone(), Some(owner.clone())).await.unwrap();
        assert_eq!(response.status(), 200, "{path} as the owner");
        assert_eq!(response.headers()["cache-control"], "private, no-store", "{path}");
    }
    let blob = get(format!("/v1/blobs/{digest}"), Some(owner.clone())).await.unwrap();
    assert!(blob.text().await.unwrap().contains("THE-SECRET-SYSTEM-PROMPT"));
    // Nor by id over the control plane, nor in search.
    let (reason, _) = method(&gateway, Some(&other), "actors.get", json!({"id": id}))
        .await
        .unwrap_err();
    assert_eq!(reason, "NOT_FOUND");
    let found = method(&gateway, None, "packages.search", json!({"q": "greeter"}))
        .await
        .unwrap();
    assert_eq!(found["packages"], json!([]));

    // The private deployment's card needs a key.
    let card = "/v1/actors/secrets/greeter/.well-known/agent-card.json".to_string();
    let response = get(card.clone(), None).await.unwrap();
    assert_eq!(response.status(), 401);
    let response = get(card.clone(), Some(other.clone())).await.unwrap();
    assert_eq!(response.status(), 200);

    // Published public, it reads like any package.
    op(
        &gateway,
        &owner,
        "actors.publish",
        json!({"source": GREETER, "visibility": "public"}),
    )
    .await;
    for path in &private_paths {
        assert_eq!(get(path.clone(), None).await.unwrap().status(), 200, "{path}");
    }
    assert_eq!(get(card, None).await.unwrap().status(), 200);
}

/// One JSON-RPC call to the deployment's A2A endpoint.
async fn actor_rpc(gateway: &Gateway, version: Option<&str>, method: &str, params: Value) -> Value {
    let mut request = gateway
        .http
        .post(format!("{}/v1/actors/secrets/greeter/a2a", gateway.url))
        .bearer_auth(&gateway.api_key)
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}));
    if let Some(version) = version {
        request = request.header("a2a-version", version);
    }
    let text = request.send().await.unwrap().text().await.unwrap();
    // A streamed answer: its first frame.
    let text = text
        .strip_prefix("data: ")
        .map_or(text.as_str(), |t| t.lines().next().unwrap());
    serde_json::from_str(text).unwrap()
}

fn error_reason(answer: &Value) -> (i64, String) {
    let error = &answer["error"];
    assert_eq!(
        error["data"][0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
        "{answer}"
    );
    (
        error["code"].as_i64().unwrap(),
        error["data"][0]["reason"].as_str().unwrap().into(),
    )
}

#[tokio::test]
async fn a_deployments_a2a_endpoint_answers_errors_as_the_control_plane_does() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let key = gateway.api_key.clone();
    op(&gateway, &key, "namespaces.create", json!({"name": "secrets"})).await;
    let actor = op(&gateway, &key, "actors.publish", json!({"source": GREETER})).await;
    op(
        &gateway,
        &key,
        "deployments.create",
        json!({"namespace": "secrets", "name": "greeter", "actor_id": actor["id"]}),
    )
    .await;
    let v1 = Some("1.0");
    let cases = [
        (None, "SendMessage", json!({}), -32009, "VERSION_NOT_SUPPORTED"),
        (Some("0.3"), "SendMessage", json!({}), -32009, "VERSION_NOT_SUPPORTED"),
        (v1, "GetTask", json!({"id": "task_x"}), -32001, "TASK_NOT_FOUND"),
        (v1, "CancelTask", json!({"id": "task_x"}), -32001, "TASK_NOT_FOUND"),
        (v1, "SubscribeToTask", json!({"id": "task_x"}), -32001, "TASK_NOT_FOUND"),
        (
            v1,
            "CreateTaskPushNotificationConfig",
            json!({}),
            -32003,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
        ),
        (v1, "GetExtendedAgentCard", json!({}), -32004, "UNSUPPORTED_OPERATION"),
        (v1, "NoSuchMethod", json!({}), -32601, "METHOD_NOT_FOUND"),
    ];
    for (version, name, params, code, reason) in cases {
        let answer = actor_rpc(&gateway, version, name, params).await;
        assert_eq!(
            error_reason(&answer),
            (code, reason.to_string()),
            "{name} with {version:?}: {answer}"
        );
        assert_eq!(answer["id"], 9);
    }
    // Input that fails the actor's schema is invalid params on both paths.
    let bad = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"nom": 1}}]}});
    for name in ["SendMessage", "SendStreamingMessage"] {
        let answer = actor_rpc(&gateway, v1, name, bad.clone()).await;
        assert_eq!(
            error_reason(&answer),
            (-32602, "INVALID_PARAMS".to_string()),
            "{name}: {answer}"
        );
    }
    // A file or an unlisted media type is ContentTypeNotSupported; a taskId
    // names a task no run keeps.
    let file = json!({"message": {"messageId": "m3", "role": "ROLE_USER",
                                  "parts": [{"raw": "dGNr", "mediaType": "application/x-unknown"}]}});
    let answer = actor_rpc(&gateway, v1, "SendMessage", file).await;
    assert_eq!(
        error_reason(&answer),
        (-32005, "CONTENT_TYPE_NOT_SUPPORTED".to_string()),
        "{answer}"
    );
    let follow_up = json!({"message": {"messageId": "m4", "role": "ROLE_USER", "taskId": "task_gone",
                                       "parts": [{"data": {"name": "Ada"}}]}});
    let answer = actor_rpc(&gateway, v1, "SendMessage", follow_up).await;
    assert_eq!(
        error_reason(&answer),
        (-32001, "TASK_NOT_FOUND".to_string()),
        "{answer}"
    );

    let good = json!({"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"data": {"name": "Ada"}}]}});
    let answer = actor_rpc(&gateway, v1, "SendMessage", good).await;
    assert_eq!(answer["result"]["message"]["role"], "ROLE_AGENT", "{answer}");
    // Metadata keys are camelCase like the rest of the protocol.
    let metadata = answer["result"]["message"]["metadata"].as_object().unwrap();
    assert!(
        metadata.contains_key("runId") && metadata.contains_key("costUsd"),
        "{answer}"
    );
}
