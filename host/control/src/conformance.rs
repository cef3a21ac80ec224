//! Conformance test mode (`[control_plane] conformance_mode = true`, never in
//! production): makes the server a target for the official A2A compatibility
//! kit. Unauthenticated callers become a sandbox principal that owns no real
//! data, and a `SendMessage` that is not a control-plane op follows the kit's
//! scripted `messageId` prefixes. See docs/control-plane.md.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::error::RpcError;
use super::tasks::{self, data_part, is_terminal, status};
use tollgate_core::db::{Database, new_id};
use tollgate_identity::auth::Principal;
use tollgate_identity::auth::permissions::Role;

pub const SANDBOX: &str = "sandbox";

/// The principal of an unauthenticated caller: a user and workspace that do not
/// exist, so every workspace op answers not-found.
pub fn sandbox_principal() -> Arc<Principal> {
    Arc::new(Principal {
        key_id: SANDBOX.into(),
        workspace_id: format!("ws_{SANDBOX}"),
        user_id: Some(format!("user_{SANDBOX}")),
        role: Role::Viewer,
        scope: tollgate_identity::auth::KeyScope::Workspace,
        requests_per_minute: None,
        console_session: None,
        tools: Default::default(),
    })
}

fn agent_message(task_id: Option<&str>, context_id: &str, parts: Vec<Value>) -> Value {
    let mut message = json!({
        "messageId": new_id("msg"),
        "role": "ROLE_AGENT",
        "contextId": context_id,
        "parts": parts,
    });
    if let Some(task_id) = task_id {
        message["taskId"] = json!(task_id);
    }
    message
}

fn text_of(message: &Value) -> String {
    message["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// What the kit's script asks for: (final state, artifact parts, status text).
fn scripted(message: &Value) -> (&'static str, Vec<Value>, Option<String>) {
    let id = message["messageId"].as_str().unwrap_or_default();
    let artifact = |part: Value| vec![part];
    if id.starts_with("tck-complete-task") {
        (tasks::COMPLETED, vec![], Some("Hello from TCK".into()))
    } else if id.starts_with("tck-artifact-text") {
        (
            tasks::COMPLETED,
            artifact(json!({"text": "Generated text content"})),
            None,
        )
    } else if id.starts_with("tck-artifact-file-url") {
        let part =
            json!({"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"});
        (tasks::COMPLETED, artifact(part), None)
    } else if id.starts_with("tck-artifact-file") {
        // "file content" in base64.
        let part = json!({"raw": "ZmlsZSBjb250ZW50", "filename": "output.txt", "mediaType": "text/plain"});
        (tasks::COMPLETED, artifact(part), None)
    } else if id.starts_with("tck-artifact-data") {
        (
            tasks::COMPLETED,
            artifact(data_part(json!({"key": "value", "count": 42}))),
            None,
        )
    } else if id.starts_with("tck-input-required") {
        (
            "TASK_STATE_INPUT_REQUIRED",
            vec![],
            Some("Please provide more input.".into()),
        )
    } else if id.starts_with("tck-reject-task") {
        (
            "TASK_STATE_REJECTED",
            vec![],
            Some("Task rejected by the test agent.".into()),
        )
    } else {
        (
            tasks::COMPLETED,
            vec![json!({"text": format!("Echo: {}", text_of(message))})],
            None,
        )
    }
}

/// A scripted `SendMessage` for `owner`: a new task, a follow-up on an
/// input-required task, or (for `tck-message-response`) a plain message.
pub async fn send(database: &Database, owner: &str, params: &Value) -> Result<Value, RpcError> {
    let message = &params["message"];
    let given_context = message["contextId"].as_str().filter(|c| !c.is_empty());
    let given_task = message["taskId"].as_str().filter(|t| !t.is_empty());
    if message["messageId"]
        .as_str()
        .unwrap_or_default()
        .starts_with("tck-message-response")
        && given_task.is_none()
    {
        let context_id = given_context.map_or_else(|| new_id("ctx"), str::to_string);
        let part = json!({"text": "Direct message response"});
        return Ok(json!({ "message": agent_message(None, &context_id, vec![part]) }));
    }
    let (mut task, follow_up) = match given_task {
        Some(task_id) => {
            let task = tasks::load(database, owner, task_id).await?;
            if let Some(context) = given_context
                && task["contextId"].as_str() != Some(context)
            {
                return Err(RpcError::invalid_params(format!(
                    "contextId '{context}' does not match task '{task_id}'"
                )));
            }
            if is_terminal(task["status"]["state"].as_str().unwrap_or_default()) {
                return Err(RpcError::unsupported(format!(
                    "Task '{task_id}' is in a terminal state"
                )));
            }
            (task, true)
        }
        None => {
            let context_id = given_context.map_or_else(|| new_id("ctx"), str::to_string);
            (
                json!({ "id": new_id("task"), "contextId": context_id, "history": [] }),
                false,
            )
        }
    };
    let task_id = task["id"].as_str().unwrap_or_default().to_string();
    let context_id = task["contextId"].as_str().unwrap_or_default().to_string();
    let mut received = message.clone();
    received["taskId"] = json!(task_id);
    received["contextId"] = json!(context_id);
    if let Some(history) = task["history"].as_array_mut() {
        history.push(received);
    }
    let (state, artifact_parts, text) = scripted(message);
    let status_message = text.map(|text| agent_message(Some(&task_id), &context_id, vec![json!({"text": text})]));
    let mut finished = task.clone();
    finished["status"] = status(state, status_message);
    if !artifact_parts.is_empty() {
        finished["artifacts"] = json!([{ "artifactId": new_id("art"), "name": "result", "parts": artifact_parts }]);
    }
    let return_immediately = params["configuration"]["returnImmediately"].as_bool() == Some(true);
    if return_immediately {
        // Answer with the task still working; finish it in the background.
        task["status"] = status("TASK_STATE_WORKING", None);
        store(database, owner, &task, follow_up).await?;
        let (database, owner) = (database.clone(), owner.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Err(e) = tasks::update(&database, &owner, &finished).await {
                tracing::warn!("conformance task update failed: {e}");
            }
        });
        Ok(json!({ "task": task }))
    } else {
        store(database, owner, &finished, follow_up).await?;
        Ok(json!({ "task": finished }))
    }
}

async fn store(database: &Database, owner: &str, task: &Value, exists: bool) -> Result<(), RpcError> {
    let stored = if exists {
        tasks::update(database, owner, task).await
    } else {
        tasks::save(database, owner, task).await
    };
    stored.map_err(|e| {
        tracing::error!("storing a conformance task: {e}");
        RpcError::internal()
    })
}
