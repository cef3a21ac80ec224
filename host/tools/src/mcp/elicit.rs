//! Elicitation (`elicitation/create`): a tool's call asks the user of the
//! MCP client that made it for input, and resumes with the answer. The only
//! code that issues SQL against `mcp_elicitations`.
//!
//! The question goes out on the call's SSE answer (`stream.rs`), as a
//! JSON-RPC request whose id is random. The client answers with a POST of
//! its own, which any gateway of a cluster may receive ([`reply`]): the
//! answer is checked, bounded ([`MAX_REPLY_BYTES`]) and stored on the
//! pending row, which only the session that was asked (and so only its
//! workspace) can fill, once, before it expires. The waiting call is woken
//! at once when the reply lands on its own gateway, and otherwise finds it
//! by polling the row ([`POLL`]). A call waits at most
//! `components.elicitation_timeout_ms`, then its question fails as
//! `timed-out`, and the row goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, mpsc};
use tollgate_components::{ElicitAction, ElicitError, ElicitOutcome, Elicited, Elicitor};
use tollgate_core::db::{Database, now_ms};

use super::{INVALID_PARAMS, INVALID_REQUEST, SESSION_HEADER, Scope, error};

/// The largest reply a client may send to an elicitation, in bytes (its
/// JSON-RPC message, serialized).
pub const MAX_REPLY_BYTES: usize = 64 * 1024;
/// How often a call waiting on another gateway's reply looks at its row.
const POLL: Duration = Duration::from_millis(250);

/// Pending elicitations: the rows, and the calls waiting on this gateway.
pub struct Elicitations {
    database: Database,
    /// Woken when a reply for that id lands on this gateway.
    waiting: Mutex<HashMap<String, Arc<Notify>>>,
    /// Questions waiting on this gateway, per workspace (`Seat`s held).
    seats: Mutex<HashMap<String, u32>>,
}

impl Elicitations {
    pub fn new(database: Database) -> Self {
        Self {
            database,
            waiting: Mutex::default(),
            seats: Mutex::default(),
        }
    }

    /// A place for one more of `workspace_id`'s questions to wait here, or
    /// `None` when it has `cap` waiting already. A waiting question holds a
    /// sandbox slot and a thread, which other tenants need too.
    fn seat(self: &Arc<Self>, workspace_id: &str, cap: u32) -> Option<Seat> {
        let mut seats = self.seats.lock().expect("elicitation seats");
        let held = seats.entry(workspace_id.to_string()).or_insert(0);
        if *held >= cap {
            return None;
        }
        *held += 1;
        Some(Seat {
            elicitations: self.clone(),
            workspace_id: workspace_id.to_string(),
        })
    }

    /// Records a question `id` put to `session_id`, answerable until
    /// `timeout` from now. Rows long expired (a gateway stopped mid-wait)
    /// are dropped on the way.
    async fn open(&self, id: &str, session_id: &str, workspace_id: &str, timeout: Duration) -> anyhow::Result<()> {
        let now = now_ms();
        sqlx::query("DELETE FROM mcp_elicitations WHERE expires_at_ms < $1")
            .bind(now - 60_000)
            .execute(&self.database.pool)
            .await?;
        sqlx::query(
            "INSERT INTO mcp_elicitations (id, session_id, workspace_id, created_at_ms, expires_at_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(session_id)
        .bind(workspace_id)
        .bind(now)
        .bind(now + timeout.as_millis() as i64)
        .execute(&self.database.pool)
        .await?;
        Ok(())
    }

    /// Stores `answer` for question `id`, if `session_id` of `workspace_id`
    /// was asked it and it is still waiting; wakes the call when it waits
    /// here. `false`: no such question is waiting.
    async fn answer(&self, id: &str, session_id: &str, workspace_id: &str, answer: &str) -> anyhow::Result<bool> {
        let now = now_ms();
        let stored = sqlx::query(
            "UPDATE mcp_elicitations SET answer = $1, answered_at_ms = $2 \
             WHERE id = $3 AND session_id = $4 AND workspace_id = $5 AND answer IS NULL AND expires_at_ms > $2",
        )
        .bind(answer)
        .bind(now)
        .bind(id)
        .bind(session_id)
        .bind(workspace_id)
        .execute(&self.database.pool)
        .await?;
        if stored.rows_affected() != 1 {
            return Ok(false);
        }
        if let Some(waiter) = self.waiting.lock().expect("elicitation waiters").get(id) {
            waiter.notify_one();
        }
        Ok(true)
    }

    async fn stored(&self, id: &str) -> anyhow::Result<Option<String>> {
        let answer: Option<Option<String>> = sqlx::query_scalar("SELECT answer FROM mcp_elicitations WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.database.pool)
            .await?;
        Ok(answer.flatten())
    }

    /// The answer to question `id`, once stored, or `None` at `timeout`.
    async fn wait(&self, id: &str, timeout: Duration) -> Option<String> {
        let woken = Arc::new(Notify::new());
        let _waiting = Waiting::register(self, id, woken.clone());
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.stored(id).await {
                Ok(Some(answer)) => break Some(answer),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "reading an MCP elicitation's answer"),
            }
            if tokio::time::Instant::now() >= deadline {
                break None;
            }
            let next = (tokio::time::Instant::now() + POLL).min(deadline);
            let _ = tokio::time::timeout_at(next, woken.notified()).await;
        }
    }

    /// Drops question `id`: answered or given up, it is no longer pending.
    async fn close(&self, id: &str) {
        let closed = sqlx::query("DELETE FROM mcp_elicitations WHERE id = $1")
            .bind(id)
            .execute(&self.database.pool)
            .await;
        if let Err(e) = closed {
            tracing::warn!(error = %e, "dropping an MCP elicitation");
        }
    }
}

/// One of a workspace's questions waiting on this gateway; its place is
/// given back when the question ends, however it ends.
struct Seat {
    elicitations: Arc<Elicitations>,
    workspace_id: String,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut seats = self.elicitations.seats.lock().expect("elicitation seats");
        if let Some(held) = seats.get_mut(&self.workspace_id) {
            *held -= 1;
            if *held == 0 {
                seats.remove(&self.workspace_id);
            }
        }
    }
}

/// A call waiting on this gateway, listed while it waits (also when its
/// wait is dropped part way: the client went away).
struct Waiting<'a> {
    elicitations: &'a Elicitations,
    id: String,
}

impl<'a> Waiting<'a> {
    fn register(elicitations: &'a Elicitations, id: &str, woken: Arc<Notify>) -> Self {
        let mut waiting = elicitations.waiting.lock().expect("elicitation waiters");
        waiting.insert(id.to_string(), woken);
        Self {
            elicitations,
            id: id.to_string(),
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self.elicitations.waiting.lock().expect("elicitation waiters");
        waiting.remove(&self.id);
    }
}

/// One call's way to ask its client: the session that made the call, and
/// the call's SSE answer the question goes out on.
#[derive(Clone)]
pub(super) struct Asker {
    pub elicitations: Arc<Elicitations>,
    pub session_id: String,
    pub workspace_id: String,
    pub timeout: Duration,
    /// Questions the workspace may have waiting here at once
    /// (`components.max_waiting_elicitations`).
    pub max_waiting: u32,
    /// The call's SSE answer (`stream.rs` sends what it gets as events).
    pub requests: mpsc::UnboundedSender<Value>,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Elicitor for Asker {
    fn elicit(&self, message: String, requested_schema: Value) -> BoxFuture<'static, ElicitOutcome> {
        let this = self.clone();
        Box::pin(async move {
            let Some(_seat) = this.elicitations.seat(&this.workspace_id, this.max_waiting) else {
                return Err(ElicitError::Unavailable(format!(
                    "this workspace already has {} questions waiting for an answer \
                     (components.max_waiting_elicitations); answer or cancel one first",
                    this.max_waiting
                )));
            };
            let id = format!("elicit-{}", tollgate_identity::auth::sessions::random_token());
            if let Err(e) = this
                .elicitations
                .open(&id, &this.session_id, &this.workspace_id, this.timeout)
                .await
            {
                tracing::error!(error = %e, "recording an MCP elicitation");
                return Err(ElicitError::Unavailable(
                    "the question could not be recorded; retry".into(),
                ));
            }
            let request = json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": "elicitation/create",
                "params": {"message": message, "requestedSchema": requested_schema},
            });
            let gone = || ElicitError::Unavailable("the client stopped listening to the call's answer".into());
            let outcome = match this.requests.send(request) {
                Err(_) => Err(gone()),
                Ok(()) => tokio::select! {
                    answer = this.elicitations.wait(&id, this.timeout) => match answer {
                        Some(answer) => stored_outcome(&answer),
                        None => Err(ElicitError::TimedOut),
                    },
                    // The SSE answer closed: no reply can matter any more.
                    () = this.requests.closed() => Err(gone()),
                },
            };
            this.elicitations.close(&id).await;
            outcome
        })
    }
}

/// A JSON-RPC response the client POSTed: its answer to one of this
/// session's pending questions. `Ok` when stored (the caller answers 202);
/// otherwise the status and the JSON-RPC error to answer with.
pub(super) async fn reply(scope: &Scope, message: &Value) -> Result<(), (StatusCode, Value)> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let refuse = |status, code, text: &str| Err((status, error(id.clone(), code, text)));
    let size = message.to_string().len();
    if size > MAX_REPLY_BYTES {
        let text = format!("an elicitation reply may be at most {MAX_REPLY_BYTES} bytes; this one is {size}");
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, INVALID_REQUEST, &text);
    }
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return refuse(StatusCode::BAD_REQUEST, INVALID_REQUEST, "jsonrpc must be \"2.0\"");
    }
    let Some(session) = &scope.session else {
        let text = format!("a reply to an elicitation needs the {SESSION_HEADER} of the session that was asked");
        return refuse(StatusCode::BAD_REQUEST, INVALID_REQUEST, &text);
    };
    let answer = match checked_answer(message) {
        Ok(answer) => answer,
        Err(reason) => return refuse(StatusCode::BAD_REQUEST, INVALID_PARAMS, &reason),
    };
    let Some(question) = id.as_str() else {
        return refuse(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "no question with this id was asked",
        );
    };
    match scope
        .components
        .elicitations
        .answer(question, &session.id, scope.workspace_id(), &answer.to_string())
        .await
    {
        Ok(true) => Ok(()),
        Ok(false) => refuse(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "no question with this id is waiting in this session: it was answered, timed out, or never asked here",
        ),
        Err(e) => {
            tracing::error!(error = %e, "storing an MCP elicitation's answer");
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                super::REFUSED,
                "the answer could not be stored; retry",
            )
        }
    }
}

/// The reply as stored: `{"action", "content"}` from a result MCP's
/// `ElicitResult` allows, or `{"error"}` with the client's message.
fn checked_answer(message: &Value) -> Result<Value, String> {
    if let Some(failure) = message.get("error") {
        let text = failure.get("message").and_then(Value::as_str).unwrap_or("no message");
        return Ok(json!({"error": text}));
    }
    let result = message
        .get("result")
        .and_then(Value::as_object)
        .ok_or("a reply needs a result object or an error")?;
    let action = result.get("action").and_then(Value::as_str);
    let action = action
        .filter(|action| ["accept", "decline", "cancel"].contains(action))
        .ok_or("result.action must be \"accept\", \"decline\" or \"cancel\"")?;
    let content = match (action, result.get("content")) {
        ("accept", Some(Value::Object(fields))) => Some(checked_content(fields)?),
        ("accept", Some(Value::Null) | None) => None,
        ("accept", Some(_)) => return Err("result.content must be an object".into()),
        // Content means nothing with a decline or cancel: dropped.
        _ => None,
    };
    Ok(json!({"action": action, "content": content}))
}

/// MCP lets an answer's fields be strings, numbers, booleans or lists of
/// strings (multi-select).
fn checked_content(fields: &Map<String, Value>) -> Result<Value, String> {
    for (name, value) in fields {
        let fine = match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
            Value::Array(items) => items.iter().all(Value::is_string),
            _ => false,
        };
        if !fine {
            return Err(format!(
                "result.content.{name} must be a string, a number, a boolean or a list of strings"
            ));
        }
    }
    Ok(Value::Object(fields.clone()))
}

/// What a stored answer means to the tool.
fn stored_outcome(answer: &str) -> ElicitOutcome {
    let answer: Value = serde_json::from_str(answer)
        .map_err(|e| ElicitError::Failed(format!("the stored answer is unreadable: {e}")))?;
    if let Some(text) = answer.get("error").and_then(Value::as_str) {
        return Err(ElicitError::Failed(text.to_string()));
    }
    let action = match answer.get("action").and_then(Value::as_str) {
        Some("accept") => ElicitAction::Accept,
        Some("decline") => ElicitAction::Decline,
        _ => ElicitAction::Cancel,
    };
    let content = answer
        .get("content")
        .filter(|content| content.is_object())
        .map(Value::to_string);
    Ok(Elicited { action, content })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(result: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": "elicit-x", "result": result})
    }

    #[test]
    fn answers_are_checked_and_stored_in_one_shape() {
        let accepted = checked_answer(&reply(
            json!({"action": "accept", "content": {"name": "Ada", "age": 3, "ok": true, "tags": ["a"]}}),
        ))
        .unwrap();
        let outcome = stored_outcome(&accepted.to_string()).unwrap();
        assert_eq!(outcome.action, ElicitAction::Accept);
        let content: Value = serde_json::from_str(outcome.content.as_deref().unwrap()).unwrap();
        assert_eq!(content["name"], "Ada");

        let declined = checked_answer(&reply(json!({"action": "decline", "content": {"x": 1}}))).unwrap();
        let outcome = stored_outcome(&declined.to_string()).unwrap();
        assert_eq!((outcome.action, outcome.content), (ElicitAction::Decline, None));

        let failed = checked_answer(&json!({"jsonrpc": "2.0", "id": "e", "error": {"code": -1, "message": "no"}}));
        assert!(matches!(stored_outcome(&failed.unwrap().to_string()), Err(ElicitError::Failed(m)) if m == "no"));

        for bad in [
            json!({"action": "maybe"}),
            json!({"content": {}}),
            json!({"action": "accept", "content": "text"}),
            json!({"action": "accept", "content": {"nested": {"a": 1}}}),
            json!({"action": "accept", "content": {"list": [1, 2]}}),
        ] {
            assert!(checked_answer(&reply(bad.clone())).is_err(), "{bad}");
        }
        assert!(checked_answer(&json!({"jsonrpc": "2.0", "id": 1, "result": []})).is_err());
    }
}
