//! Conformance test mode for the A2A compatibility kit.

use serde_json::{Value, json};

use super::helpers::*;
use crate::common::{Gateway, standard_config, start_mock};

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

/// One JSON-RPC call in conformance mode without a key (the sandbox principal).
async fn call(gateway: &Gateway, method_name: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method_name, "params": params});
    post(gateway, None, &body).await.1
}

fn message_ids(task: &Value) -> Vec<&str> {
    task["history"]
        .as_array()
        .unwrap_or_else(|| panic!("no history: {task}"))
        .iter()
        .map(|m| m["messageId"].as_str().unwrap())
        .collect()
}

/// The card's interface URL is the JSON-RPC endpoint with and without a
/// trailing slash (the TCK treats it as a base URL and posts to `<url>/`);
/// a body that is not JSON by its Content-Type gets -32005.
#[tokio::test]
async fn the_card_url_answers_with_or_without_a_trailing_slash() {
    let gateway = gateway().await;
    let card: Value = gateway
        .http
        .get(format!("{}/.well-known/agent-card.json", gateway.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = card["supportedInterfaces"][0]["url"].as_str().unwrap().to_string();
    assert_eq!(url, format!("{}/a2a", gateway.url));
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "workspaces/get", "params": {}});
    for (endpoint, content_type) in [
        (url.clone(), "application/json"),
        (format!("{url}/"), "application/json"),
        (format!("{url}/"), "application/a2a+json; charset=utf-8"),
    ] {
        let response = gateway
            .http
            .post(&endpoint)
            .header("A2A-Version", "1.0")
            .header("content-type", content_type)
            .bearer_auth(&gateway.api_key)
            .body(get.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{endpoint} ({content_type})");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body["result"]["workspace_id"], gateway.workspace_id,
            "{endpoint}: {body}"
        );
    }

    let response = gateway
        .http
        .post(format!("{url}/"))
        .header("A2A-Version", "1.0")
        .header("content-type", "text/plain")
        .bearer_auth(&gateway.api_key)
        .body(get.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (code(&body), rpc_error(&body["error"]).0),
        (-32005, "CONTENT_TYPE_NOT_SUPPORTED".into())
    );
    // The server keeps serving.
    assert_eq!(post(&gateway, Some(&gateway.api_key), &get).await.0, 200);
}

/// `historyLength` keeps the newest messages, under its JSON name or its proto
/// name (`history_length`, as the TCK sends it), as a number or a string.
#[tokio::test]
async fn history_length_keeps_the_newest_messages_under_either_field_name() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[control_plane]\nconformance_mode = true\n")).await;
    let message = |id: &str, task_id: Option<&str>| {
        let mut message = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": id}]});
        if let Some(task_id) = task_id {
            message["taskId"] = json!(task_id);
        }
        message
    };
    let first = call(
        &gateway,
        "SendMessage",
        json!({"message": message("tck-input-required-h1", None)}),
    )
    .await;
    let id = first["result"]["task"]["id"].as_str().unwrap().to_string();
    let second = call(
        &gateway,
        "SendMessage",
        json!({"message": message("tck-input-required-h2", Some(&id))}),
    )
    .await;
    assert_eq!(second["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    // A follow-up in proto field names, asking for no history in the answer.
    let third = call(
        &gateway,
        "SendMessage",
        json!({"message": {"message_id": "tck-complete-task-h3", "task_id": id, "role": "ROLE_USER",
                           "parts": [{"text": "done"}]},
               "configuration": {"history_length": 0}}),
    )
    .await;
    let done = &third["result"]["task"];
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{third}");
    assert_eq!(message_ids(done), Vec::<&str>::new());

    let all = call(&gateway, "GetTask", json!({"id": id})).await;
    let all_ids = ["tck-input-required-h1", "tck-input-required-h2", "tck-complete-task-h3"];
    assert_eq!(message_ids(&all["result"]), all_ids);
    for (params, expected) in [
        (json!({"id": id, "historyLength": 1}), &all_ids[2..]),
        (json!({"id": id, "history_length": 1}), &all_ids[2..]),
        (json!({"id": id, "history_length": "2"}), &all_ids[1..]),
        (json!({"id": id, "historyLength": 5}), &all_ids[..]),
        (json!({"id": id, "historyLength": 0}), &all_ids[..0]),
    ] {
        let body = call(&gateway, "GetTask", params.clone()).await;
        assert_eq!(message_ids(&body["result"]), expected, "{params}: {body}");
    }
    for params in [
        json!({"id": id, "historyLength": -1}),
        json!({"id": id, "historyLength": "one"}),
        json!({"id": id, "historyLength": 1, "history_length": 1}),
    ] {
        assert_eq!(code(&call(&gateway, "GetTask", params).await), -32602);
    }

    // ListTasks reads proto names too: `context_id` filters, `history_length` trims.
    let context = first["result"]["task"]["contextId"].clone();
    call(
        &gateway,
        "SendMessage",
        json!({"message": message("tck-complete-task-other", None)}),
    )
    .await;
    let listed = call(
        &gateway,
        "ListTasks",
        json!({"context_id": context, "history_length": 1, "page_size": 10}),
    )
    .await;
    let tasks = listed["result"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{listed}");
    assert_eq!(message_ids(&tasks[0]), &all_ids[2..]);
    assert_eq!(listed["result"]["pageSize"], 10);

    // The kit's direct-message script answers a Message with exactly its text.
    let reply = call(
        &gateway,
        "SendMessage",
        json!({"message": message("tck-message-response-1", None)}),
    )
    .await;
    assert_eq!(
        reply["result"]["message"]["parts"][0]["text"],
        "Direct message response"
    );
}
