//! Conformance test mode for the A2A compatibility kit.

use serde_json::{Value, json};

use super::common::{Gateway, standard_config, start_mock};
use super::helpers::*;

#[tokio::test]
async fn conformance_mode_follows_the_compatibility_kit_scripts() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[control_plane]\nconformance_mode = true\n")).await;
    let send = |message_id: &str, extra: Value| {
        let mut message = json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hello"}]});
        for (k, v) in extra.as_object().unwrap() {
            message[k] = v.clone();
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}});
        let gateway = &gateway;
        async move { post(gateway, None, &body).await.1 }
    };
    let task = |body: &Value| body["result"]["task"].clone();

    let done = task(&send("tck-complete-task-1", json!({})).await);
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["status"]["message"]["parts"][0]["text"], "Hello from TCK");
    for (prefix, field) in [
        ("tck-artifact-text", "text"),
        ("tck-artifact-file-url", "url"),
        ("tck-artifact-file", "raw"),
        ("tck-artifact-data", "data"),
    ] {
        let t = task(&send(&format!("{prefix}-1"), json!({})).await);
        assert!(t["artifacts"][0]["parts"][0].get(field).is_some(), "{prefix}: {t}");
    }
    let echo = task(&send("anything", json!({})).await);
    assert_eq!(echo["artifacts"][0]["parts"][0]["text"], "Echo: hello");
    let reply = send("tck-message-response-1", json!({})).await;
    assert_eq!(reply["result"]["message"]["role"], "ROLE_AGENT", "{reply}");
    assert_eq!(
        task(&send("tck-reject-task-1", json!({})).await)["status"]["state"],
        "TASK_STATE_REJECTED"
    );

    // Multi-turn: input-required, then a follow-up on the same task completes it.
    let waiting = task(&send("tck-input-required-1", json!({})).await);
    assert_eq!(waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = waiting["id"].as_str().unwrap();
    let wrong = send("follow-1", json!({"taskId": id, "contextId": "other"})).await;
    assert_eq!(code(&wrong), -32602);
    let followed = task(&send("follow-2", json!({"taskId": id, "contextId": waiting["contextId"]})).await);
    assert_eq!(followed["id"], id);
    assert_eq!(followed["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(followed["history"].as_array().unwrap().len(), 2);
    assert_eq!(code(&send("follow-3", json!({"taskId": id})).await), -32004);

    // returnImmediately: a working task now, completed shortly after.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "tck-complete-task-2", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"returnImmediately": true}}});
    let working = task(&post(&gateway, None, &body).await.1);
    assert_eq!(working["status"]["state"], "TASK_STATE_WORKING");
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": working["id"]}});
    let mut state = Value::Null;
    for _ in 0..50 {
        state = post(&gateway, None, &get).await.1["result"]["status"]["state"].clone();
        if state == "TASK_STATE_COMPLETED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(state, "TASK_STATE_COMPLETED");

    // Cancel a waiting task; the sandbox sees no real data.
    let waiting = task(&send("tck-input-required-2", json!({})).await);
    let cancel = json!({"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": waiting["id"]}});
    assert_eq!(
        post(&gateway, None, &cancel).await.1["result"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    let (reason, _) = method(&gateway, None, "wallet.get", json!({})).await.unwrap_err();
    assert_eq!(reason, "NOT_FOUND");
    let (_, tasks) = post(
        &gateway,
        Some(&gateway.api_key),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "ListTasks"}),
    )
    .await;
    assert_eq!(
        tasks["result"]["totalSize"], 0,
        "the sandbox's tasks are not a real user's"
    );
}
