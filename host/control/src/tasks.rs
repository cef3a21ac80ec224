//! A2A tasks: building v1.0 `Task` JSON for an operation's outcome, and storing
//! tasks per owner so `GetTask`/`ListTasks` never show another tenant's tasks.

use serde_json::{Value, json};

use super::error::{OpError, RpcError};
use tollgate_core::db::{Database, new_id, now_ms};

pub const COMPLETED: &str = "TASK_STATE_COMPLETED";
pub const FAILED: &str = "TASK_STATE_FAILED";
const STATES: &[&str] = &[
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    COMPLETED,
    FAILED,
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
];

/// RFC 3339 UTC timestamp with milliseconds (the proto JSON `Timestamp`).
pub fn timestamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Parses an RFC 3339 timestamp into Unix milliseconds.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

pub fn data_part(data: Value) -> Value {
    json!({ "data": data, "mediaType": "application/json" })
}

/// The task for one operation run: COMPLETED with a data artifact holding the
/// result, or FAILED with the structured error in the status message.
pub fn op_task(op: &str, request: &Value, context_id: &str, outcome: &Result<Value, OpError>) -> Value {
    let task_id = new_id("task");
    let mut history = request.clone();
    history["taskId"] = json!(task_id);
    history["contextId"] = json!(context_id);
    let mut task = json!({
        "id": task_id,
        "contextId": context_id,
        "history": [history],
        "metadata": { "op": op },
    });
    match outcome {
        Ok(result) => {
            task["status"] = json!({ "state": COMPLETED, "timestamp": timestamp(now_ms()) });
            task["artifacts"] = json!([{
                "artifactId": new_id("art"),
                "name": "result",
                "parts": [data_part(result.clone())],
            }]);
        }
        Err(error) => {
            let error = error.to_json();
            task["status"] = json!({
                "state": FAILED,
                "timestamp": timestamp(now_ms()),
                "message": {
                    "messageId": new_id("msg"),
                    "role": "ROLE_AGENT",
                    "taskId": task_id,
                    "contextId": context_id,
                    "parts": [data_part(json!({ "error": error })), { "text": error["message"] }],
                },
            });
        }
    }
    task
}

/// The task store keeps no secret: a minted key (`api_key`), a credential's
/// `value` and the usual secret names are redacted wherever they appear
/// (the rule the audit log uses too). The caller that created a secret sees
/// it once, in the answer to its own call; `GetTask`/`ListTasks` never do.
pub use tollgate_audit::redact::{REDACTED, redacted};

pub async fn save(database: &Database, owner: &str, task: &Value) -> sqlx::Result<()> {
    let task = redacted(task);
    sqlx::query(
        "INSERT INTO a2a_tasks (id, owner, context_id, state, task, updated_at_ms) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(task["id"].as_str().unwrap_or_default())
    .bind(owner)
    .bind(task["contextId"].as_str().unwrap_or_default())
    .bind(task["status"]["state"].as_str().unwrap_or_default())
    .bind(task.to_string())
    .bind(now_ms())
    .execute(&database.pool)
    .await?;
    Ok(())
}

pub async fn update(database: &Database, owner: &str, task: &Value) -> sqlx::Result<()> {
    let task = redacted(task);
    sqlx::query("UPDATE a2a_tasks SET state = $1, task = $2, updated_at_ms = $3 WHERE id = $4 AND owner = $5")
        .bind(task["status"]["state"].as_str().unwrap_or_default())
        .bind(task.to_string())
        .bind(now_ms())
        .bind(task["id"].as_str().unwrap_or_default())
        .bind(owner)
        .execute(&database.pool)
        .await?;
    Ok(())
}

/// The owner's task, or TaskNotFound (also for another owner's task).
pub async fn load(database: &Database, owner: &str, id: &str) -> Result<Value, RpcError> {
    let row: Option<String> = sqlx::query_scalar("SELECT task FROM a2a_tasks WHERE id = $1 AND owner = $2")
        .bind(id)
        .bind(owner)
        .fetch_optional(&database.pool)
        .await
        .map_err(|e| internal(e.into()))?;
    let row = row.ok_or_else(|| RpcError::task_not_found(id))?;
    serde_json::from_str(&row).map_err(|e| internal(e.into()))
}

fn internal(e: anyhow::Error) -> RpcError {
    tracing::error!("task store: {e:#}");
    RpcError::internal()
}

/// Keeps the last `n` history messages (`historyLength`); absent means all.
pub fn trim_history(task: &mut Value, history_length: Option<i64>) -> Result<(), RpcError> {
    let Some(n) = history_length else { return Ok(()) };
    if n < 0 {
        return Err(RpcError::invalid_params("historyLength must not be negative"));
    }
    if let Some(history) = task.get_mut("history").and_then(Value::as_array_mut) {
        let keep = (n as usize).min(history.len());
        history.drain(..history.len() - keep);
    }
    Ok(())
}

pub struct ListQuery {
    pub context_id: Option<String>,
    pub status: Option<String>,
    pub page_size: i64,
    pub page_token: Option<String>,
    pub history_length: Option<i64>,
    pub include_artifacts: bool,
    /// Only tasks whose status changed at or after this time (Unix ms).
    pub updated_since_ms: i64,
}

pub const DEFAULT_PAGE_SIZE: i64 = 50;
pub const MAX_PAGE_SIZE: i64 = 100;

pub fn valid_state(state: &str) -> bool {
    STATES.contains(&state)
}

/// A task status in `state`, stamped now.
pub fn status(state: &str, message: Option<Value>) -> Value {
    let mut status = serde_json::json!({ "state": state, "timestamp": timestamp(now_ms()) });
    if let Some(message) = message {
        status["message"] = message;
    }
    status
}

pub fn is_terminal(state: &str) -> bool {
    matches!(
        state,
        COMPLETED | FAILED | "TASK_STATE_CANCELED" | "TASK_STATE_REJECTED"
    )
}

/// `CancelTask`: cancels a task that has not ended. Control-plane ops finish
/// within their request, so only the conformance kit's scripted tasks can be
/// cancelled; every other task answers `TaskNotCancelableError`.
pub async fn cancel(database: &Database, owner: &str, id: &str) -> Result<Value, RpcError> {
    let mut task = load(database, owner, id).await?;
    if is_terminal(task["status"]["state"].as_str().unwrap_or_default()) {
        return Err(RpcError::task_not_cancelable(id));
    }
    task["status"] = status("TASK_STATE_CANCELED", None);
    update(database, owner, &task).await.map_err(|e| {
        tracing::error!("cancelling a task: {e}");
        RpcError::internal()
    })?;
    Ok(task)
}

/// Newest first; the page token is the last task id of the previous page
/// (task ids are time-ordered).
pub async fn list(database: &Database, owner: &str, query: ListQuery) -> Result<Value, RpcError> {
    let context = query.context_id.unwrap_or_default();
    let status = query.status.unwrap_or_default();
    let token = query.page_token.unwrap_or_default();
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT task FROM a2a_tasks WHERE owner = $1 AND ($2 = '' OR context_id = $2) AND ($3 = '' OR state = $3) \
         AND ($4 = '' OR id < $4) AND updated_at_ms >= $6 ORDER BY id DESC LIMIT $5",
    )
    .bind(owner)
    .bind(&context)
    .bind(&status)
    .bind(&token)
    .bind(query.page_size + 1)
    .bind(query.updated_since_ms)
    .fetch_all(&database.pool)
    .await
    .map_err(|e| internal(e.into()))?;
    let total: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM a2a_tasks WHERE owner = $1 AND ($2 = '' OR context_id = $2) \
         AND ($3 = '' OR state = $3) AND updated_at_ms >= $4",
    )
    .bind(owner)
    .bind(&context)
    .bind(&status)
    .bind(query.updated_since_ms)
    .fetch_one(&database.pool)
    .await
    .map_err(|e| internal(e.into()))?;
    let more = rows.len() as i64 > query.page_size;
    let mut tasks = Vec::new();
    for row in rows.into_iter().take(query.page_size as usize) {
        let mut task: Value = serde_json::from_str(&row).map_err(|e| internal(e.into()))?;
        trim_history(&mut task, query.history_length)?;
        if !query.include_artifacts
            && let Some(object) = task.as_object_mut()
        {
            object.remove("artifacts");
        }
        tasks.push(task);
    }
    let next = if more {
        tasks
            .last()
            .and_then(|t| t["id"].as_str())
            .unwrap_or_default()
            .to_string()
    } else {
        String::new()
    };
    Ok(json!({ "tasks": tasks, "nextPageToken": next, "pageSize": query.page_size, "totalSize": total }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_tasks_hold_no_secret() {
        let request = json!({"parts": [{"data": {"op": "installs.create", "params": {
            "package": "acme/search", "name": "s",
            "credentials": {"search": {"value": "sk-live-credential", "placement": "bearer"}},
            "config": {"value": "not a secret"},
        }}}]});
        let result = json!({"key_id": "key_1", "hint": "tg_live_AbCd…wxyz", "api_key": "tg_live_full_secret"});
        let task = op_task("keys.create", &request, "ctx_1", &Ok(result));
        let stored = redacted(&task).to_string();
        assert!(!stored.contains("sk-live-credential"), "{stored}");
        assert!(!stored.contains("tg_live_full_secret"), "{stored}");
        assert!(stored.contains("tg_live_AbCd…wxyz"), "the hint stays: {stored}");
        assert!(
            stored.contains("not a secret"),
            "a config value named `value` outside credentials stays"
        );
        assert!(stored.contains("\"placement\":\"bearer\""));
        // The answer to the creating call still carries the secret.
        assert!(task.to_string().contains("tg_live_full_secret"));
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(super::timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::timestamp(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
        assert_eq!(
            super::parse_timestamp("2024-02-29T12:34:56.789Z"),
            Some(1_709_210_096_789)
        );
    }
}
