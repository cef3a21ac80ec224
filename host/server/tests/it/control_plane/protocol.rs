//! JSON-RPC and A2A protocol behaviour: error codes, version header, batches,
//! body limit, per-principal tasks.

use serde_json::{Value, json};

use super::helpers::*;

#[tokio::test]
async fn malformed_json_rpc_gets_the_right_codes_and_the_server_keeps_serving() {
    let gateway = gateway().await;
    let v = Some("1.0");
    let (_, body) = raw(&gateway, v, "{not json").await;
    assert_eq!((code(&body), body["id"].clone()), (-32700, Value::Null));
    let (_, body) = raw(&gateway, v, r#"{"id": 1, "method": "GetTask"}"#).await;
    assert_eq!((code(&body), body["id"].clone()), (-32600, json!(1)));
    let (_, body) = raw(&gateway, v, r#"{"jsonrpc": "2.0", "id": 2, "method": 5}"#).await;
    assert_eq!(code(&body), -32600);
    let (_, body) = raw(&gateway, v, "[]").await;
    assert_eq!(code(&body), -32600);
    let (_, body) = raw(&gateway, v, r#"{"jsonrpc": "2.0", "id": 3, "method": "NoSuchMethod"}"#).await;
    assert_eq!(
        (code(&body), rpc_error(&body["error"]).0),
        (-32601, "METHOD_NOT_FOUND".into())
    );
    let (_, body) = raw(
        &gateway,
        v,
        r#"{"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": [1]}"#,
    )
    .await;
    assert_eq!(code(&body), -32602);
    let (_, body) = raw(
        &gateway,
        v,
        r#"{"jsonrpc": "2.0", "id": 5, "method": "keys/create", "params": {"nmae": "x"}}"#,
    )
    .await;
    assert_eq!(code(&body), -32602);
    let (_, body) = raw(&gateway, v, r#"{"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}"#).await;
    assert_eq!(code(&body), -32602);
    let (_, body) = raw(
        &gateway,
        v,
        r#"{"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "task_nope"}}"#,
    )
    .await;
    assert_eq!(
        (code(&body), rpc_error(&body["error"]).0),
        (-32001, "TASK_NOT_FOUND".into())
    );
    let (_, body) = raw(
        &gateway,
        v,
        r#"{"jsonrpc": "2.0", "id": 8, "method": "SendStreamingMessage", "params": {}}"#,
    )
    .await;
    assert_eq!(code(&body), -32004);
    let (_, body) = raw(
        &gateway,
        v,
        r#"{"jsonrpc": "2.0", "id": 9, "method": "CreateTaskPushNotificationConfig", "params": {}}"#,
    )
    .await;
    assert_eq!(code(&body), -32003);

    // A2A-Version: absent or empty means 0.3, which is not served; 1.0 is.
    for version in [None, Some(""), Some("0.3"), Some("2.0")] {
        let (_, body) = raw(
            &gateway,
            version,
            r#"{"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}"#,
        )
        .await;
        assert_eq!(code(&body), -32009, "{version:?}");
    }
    let (_, body) = raw(&gateway, v, r#"{"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}"#).await;
    assert!(body["result"]["tasks"].is_array(), "{body}");

    // A batch with a success, a notification, a bad entry and an unknown method.
    let batch = json!([
        {"jsonrpc": "2.0", "id": "a", "method": "workspaces/list"},
        {"jsonrpc": "2.0", "method": "workspaces/list"},
        42,
        {"jsonrpc": "2.0", "id": "c", "method": "Nope"},
    ]);
    let (status, body) = raw(&gateway, v, batch.to_string()).await;
    assert_eq!(status, 200);
    let answers = body.as_array().unwrap();
    assert_eq!(answers.len(), 3, "{body}");
    assert!(answers[0]["result"]["workspaces"].is_array());
    assert_eq!((code(&answers[1]), answers[1]["id"].clone()), (-32600, Value::Null));
    assert_eq!((code(&answers[2]), answers[2]["id"].clone()), (-32601, json!("c")));
    // Notifications alone get no body.
    let (status, _) = raw(&gateway, v, r#"{"jsonrpc": "2.0", "method": "workspaces/list"}"#).await;
    assert_eq!(status, 204);

    // Oversized body.
    let huge = format!(
        r#"{{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {{"pad": "{}"}}}}"#,
        "a".repeat(1_400_000)
    );
    let (status, body) = raw(&gateway, v, huge).await;
    assert_eq!((status, code(&body)), (413, -32600));

    // Still serving both planes.
    let (_, body) = raw(&gateway, v, r#"{"jsonrpc": "2.0", "id": 1, "method": "wallet/get"}"#).await;
    assert_eq!(body["result"]["available_usd"], "100.000000000", "{body}");
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn tasks_are_per_principal_and_cannot_be_cancelled() {
    let gateway = gateway().await;
    let alice = signup(&gateway, "alice@tasks.test").await;
    let bob = signup(&gateway, "bob@tasks.test").await;
    let message = |op: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "contextId": "ctx-1",
        "parts": [{"data": {"op": op, "params": {}}, "mediaType": "application/json"}]}}})
    };
    let (_, sent) = post(&gateway, Some(&alice.key), &message("wallet.get")).await;
    let task = &sent["result"]["task"];
    assert_eq!(task["contextId"], "ctx-1");
    assert_eq!(task["history"][0]["messageId"], "m1");
    let id = task["id"].as_str().unwrap();
    let get = |key: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}});
        let key = key.to_string();
        let gateway = &gateway;
        async move { post(gateway, Some(&key), &body).await.1 }
    };
    assert_eq!(get(&alice.key).await["result"], *task);
    assert_eq!(code(&get(&bob.key).await), -32001);
    let (_, listed) = post(
        &gateway,
        Some(&bob.key),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "ListTasks"}),
    )
    .await;
    assert_eq!(listed["result"]["tasks"], json!([]));
    let (_, listed) = post(
        &gateway,
        Some(&alice.key),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {"contextId": "ctx-1", "status": "TASK_STATE_COMPLETED"}}),
    )
    .await;
    assert_eq!(listed["result"]["totalSize"], 1, "{listed}");
    assert!(listed["result"]["tasks"][0].get("artifacts").is_none());
    let since =
        |t: &str| json!({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {"statusTimestampAfter": t}});
    let (_, later) = post(&gateway, Some(&alice.key), &since("2999-01-01T00:00:00Z")).await;
    assert_eq!(later["result"]["totalSize"], 0, "{later}");
    let (_, earlier) = post(&gateway, Some(&alice.key), &since("2020-01-01T00:00:00Z")).await;
    assert_eq!(earlier["result"]["totalSize"], 1, "{earlier}");
    assert_eq!(
        code(&post(&gateway, Some(&alice.key), &since("yesterday")).await.1),
        -32602
    );
    let (_, cancel) = post(
        &gateway,
        Some(&alice.key),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": id}}),
    )
    .await;
    assert_eq!(code(&cancel), -32002);
    let (_, extended) = post(
        &gateway,
        Some(&alice.key),
        &json!({"jsonrpc": "2.0", "id": 5, "method": "GetExtendedAgentCard"}),
    )
    .await;
    let ops = &extended["result"]["capabilities"]["extensions"][0]["params"]["operations"];
    assert!(ops[0]["paramsSchema"].is_object(), "{extended}");
    let _ = bob.workspace_id;
}
