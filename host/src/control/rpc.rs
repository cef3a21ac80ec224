//! `POST /a2a`: JSON-RPC 2.0 (single or batch) carrying the A2A v1.0 core
//! methods and the control-plane extension methods. Written on axum + serde
//! rather than a JSON-RPC framework because A2A needs the HTTP headers
//! (`Authorization`, `A2A-Version`) of each call.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::{OpError, RpcError};
use super::registry::{self, Op};
use super::{card, tasks};
use crate::auth::Principal;
use crate::db::new_id;
use crate::server::Gateway;

const MAX_BATCH: usize = 100;

pub async fn endpoint(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let error = RpcError::invalid_request(format!("Unreadable request body: {}", rejection.body_text()));
            return reply(rejection.status(), error_response(Value::Null, &error));
        }
    };
    let caller = match authenticate(&gateway, &headers).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let version = version(&headers);
    let request: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => return reply(StatusCode::OK, error_response(Value::Null, &RpcError::parse_error(e))),
    };
    let call = Call {
        base_url: gateway.control.public_url(Some(&headers)),
        gateway,
        caller,
        version,
    };
    match request {
        Value::Array(entries) if entries.is_empty() => reply(
            StatusCode::OK,
            error_response(Value::Null, &RpcError::invalid_request("Empty batch")),
        ),
        Value::Array(entries) if entries.len() > MAX_BATCH => reply(
            StatusCode::OK,
            error_response(
                Value::Null,
                &RpcError::invalid_request(format!("A batch holds at most {MAX_BATCH} requests")),
            ),
        ),
        Value::Array(entries) => {
            let mut responses = Vec::new();
            for entry in entries {
                responses.extend(call.entry(entry).await);
            }
            if responses.is_empty() {
                StatusCode::NO_CONTENT.into_response()
            } else {
                reply(StatusCode::OK, Value::Array(responses))
            }
        }
        single => match call.entry(single).await {
            Some(response) => reply(StatusCode::OK, response),
            None => StatusCode::NO_CONTENT.into_response(),
        },
    }
}

fn reply(status: StatusCode, body: Value) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn error_response(id: Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

/// No key is fine (only `accounts.signup` and discovery work without one); a
/// key that does not resolve fails the whole HTTP request with 401.
async fn authenticate(gateway: &Gateway, headers: &HeaderMap) -> Result<Option<Arc<Principal>>, Response> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(gateway
            .control
            .conformance_mode()
            .then(super::conformance::sandbox_principal));
    };
    let unauthorized = |message: &str| {
        let error = RpcError::new(
            super::error::OPERATION_FAILED,
            message,
            "UNAUTHENTICATED",
            super::error::TOLLGATE_DOMAIN,
        );
        let mut response = reply(StatusCode::UNAUTHORIZED, error_response(Value::Null, &error));
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        response
    };
    let secret = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or_else(|| unauthorized("The Authorization header must be 'Bearer <API key>'."))?;
    match gateway.keys.resolve(secret).await {
        Ok(Some(principal)) => Ok(Some(principal)),
        Ok(None) => Err(unauthorized("Invalid API key.")),
        Err(e) => {
            tracing::error!(error = %e, "key lookup failed");
            Err(reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                error_response(Value::Null, &RpcError::internal()),
            ))
        }
    }
}

/// `A2A-Version`: absent or empty means 0.3, which this server does not speak.
fn version(headers: &HeaderMap) -> Result<(), RpcError> {
    let version = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or("0.3");
    if version == "1.0" || version.starts_with("1.0.") {
        Ok(())
    } else {
        Err(RpcError::version_not_supported(version))
    }
}

/// Who owns the tasks a caller creates: its user (or, for a user-less key, the key).
fn owner(principal: &Principal) -> String {
    principal
        .user_id
        .clone()
        .unwrap_or_else(|| format!("key:{}", principal.key_id))
}

struct Call {
    base_url: String,
    gateway: Arc<Gateway>,
    caller: Option<Arc<Principal>>,
    version: Result<(), RpcError>,
}

impl Call {
    /// One JSON-RPC entry; `None` for a notification (no `id`).
    async fn entry(&self, entry: Value) -> Option<Value> {
        let Value::Object(mut object) = entry else {
            return Some(error_response(
                Value::Null,
                &RpcError::invalid_request("A request must be a JSON object"),
            ));
        };
        let id = match object.remove("id") {
            None => None,
            Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
            Some(_) => {
                return Some(error_response(
                    Value::Null,
                    &RpcError::invalid_request("id must be a string, a number or null"),
                ));
            }
        };
        let respond_id = id.clone().unwrap_or(Value::Null);
        if object.get("jsonrpc") != Some(&json!("2.0")) {
            return Some(error_response(
                respond_id,
                &RpcError::invalid_request("jsonrpc must be \"2.0\""),
            ));
        }
        let Some(Value::String(method)) = object.remove("method") else {
            return Some(error_response(
                respond_id,
                &RpcError::invalid_request("method must be a string"),
            ));
        };
        let params = match object.remove("params") {
            None | Some(Value::Null) => json!({}),
            Some(params @ Value::Object(_)) => params,
            Some(Value::Array(_)) => {
                return Some(error_response(
                    respond_id,
                    &RpcError::invalid_params("params must be an object (by-name), not an array"),
                ));
            }
            Some(_) => {
                return Some(error_response(
                    respond_id,
                    &RpcError::invalid_request("params must be an object or an array"),
                ));
            }
        };
        let outcome = match &self.version {
            Err(error) => Err(error.clone()),
            Ok(()) => self.method(&method, params).await,
        };
        let id = id?;
        Some(match outcome {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(error) => error_response(id, &error),
        })
    }

    fn require_caller(&self) -> Result<&Principal, RpcError> {
        self.caller
            .as_deref()
            .ok_or_else(|| OpError::Unauthenticated.into_rpc())
    }

    async fn method(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "SendMessage" => self.send_message(params).await,
            "GetTask" => self.get_task(params).await,
            "ListTasks" => self.list_tasks(params).await,
            "CancelTask" => {
                let caller = self.require_caller()?;
                let id = string_param(&params, "id")?.ok_or_else(|| RpcError::invalid_params("id is required"))?;
                super::conformance::cancel(&self.gateway.database, &owner(caller), &id).await
            }
            "GetExtendedAgentCard" => {
                self.require_caller()?;
                Ok(card::agent_card(&self.base_url, true))
            }
            "SendStreamingMessage" | "SubscribeToTask" => Err(RpcError::unsupported(
                "Streaming is not supported (capabilities.streaming is false)",
            )),
            "CreateTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig" => Err(RpcError::push_not_supported()),
            other => match registry::by_method(other) {
                Some(op) => registry::run(op, self.gateway.clone(), self.caller.clone(), params)
                    .await
                    .map_err(OpError::into_rpc),
                None => Err(RpcError::method_not_found(other)),
            },
        }
    }

    /// Exactly one data part `{"op", "params"}` → a COMPLETED or FAILED task.
    async fn send_message(&self, params: Value) -> Result<Value, RpcError> {
        let message = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| RpcError::invalid_params("message is required"))?;
        let (op, op_params) = match parse_op(message) {
            Ok(parsed) => parsed,
            Err(_) if self.gateway.control.conformance_mode() => {
                let caller = self.require_caller()?;
                return super::conformance::send(&self.gateway.database, &owner(caller), &params).await;
            }
            Err(error) => return Err(error),
        };
        let context_id = match message.get("contextId") {
            None | Some(Value::Null) => new_id("ctx"),
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(Value::String(_)) => new_id("ctx"),
            Some(_) => return Err(RpcError::invalid_params("message.contextId must be a string")),
        };
        if let Some(task_id) = message
            .get("taskId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
        {
            // Every control-plane task ends in a terminal state at once.
            let caller = self
                .caller
                .as_deref()
                .ok_or_else(|| RpcError::task_not_found(task_id))?;
            tasks::load(&self.gateway.database, &owner(caller), task_id).await?;
            return Err(RpcError::unsupported(format!(
                "Task '{task_id}' is in a terminal state; send a new message without taskId"
            )));
        }
        let outcome = registry::run(op, self.gateway.clone(), self.caller.clone(), op_params).await;
        let mut task = tasks::op_task(op.name, message, &context_id, &outcome);
        let owner = match (&self.caller, &outcome) {
            (Some(caller), _) => Some(owner(caller)),
            // A sign-up's task belongs to the user it created.
            (None, Ok(result)) => result["user_id"].as_str().map(str::to_string),
            (None, Err(_)) => None,
        };
        if let Some(owner) = owner {
            tasks::save(&self.gateway.database, &owner, &task).await.map_err(|e| {
                tracing::error!("saving task: {e}");
                RpcError::internal()
            })?;
        }
        let history_length = params
            .get("configuration")
            .and_then(|c| c.get("historyLength"))
            .and_then(Value::as_i64);
        tasks::trim_history(&mut task, history_length)?;
        Ok(json!({ "task": task }))
    }

    async fn get_task(&self, params: Value) -> Result<Value, RpcError> {
        let caller = self.require_caller()?;
        let id = string_param(&params, "id")?.ok_or_else(|| RpcError::invalid_params("id is required"))?;
        let mut task = tasks::load(&self.gateway.database, &owner(caller), &id).await?;
        tasks::trim_history(&mut task, int_param(&params, "historyLength")?)?;
        Ok(task)
    }

    async fn list_tasks(&self, params: Value) -> Result<Value, RpcError> {
        let caller = self.require_caller()?;
        let page_size = match int_param(&params, "pageSize")? {
            None | Some(0) => tasks::DEFAULT_PAGE_SIZE,
            Some(n) if (1..=tasks::MAX_PAGE_SIZE).contains(&n) => n,
            Some(_) => {
                return Err(RpcError::invalid_params(format!(
                    "pageSize must be 1 to {}",
                    tasks::MAX_PAGE_SIZE
                )));
            }
        };
        let status = string_param(&params, "status")?.filter(|s| s != "TASK_STATE_UNSPECIFIED");
        if let Some(status) = &status
            && !tasks::valid_state(status)
        {
            return Err(RpcError::invalid_params(format!("unknown task state '{status}'")));
        }
        let include_artifacts = match params.get("includeArtifacts") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(RpcError::invalid_params("includeArtifacts must be a boolean")),
        };
        let updated_since_ms = match string_param(&params, "statusTimestampAfter")? {
            None => 0,
            Some(text) => tasks::parse_timestamp(&text)
                .ok_or_else(|| RpcError::invalid_params("statusTimestampAfter must be an RFC 3339 timestamp"))?,
        };
        let query = tasks::ListQuery {
            updated_since_ms,
            context_id: string_param(&params, "contextId")?,
            status,
            page_size,
            page_token: string_param(&params, "pageToken")?,
            history_length: int_param(&params, "historyLength")?,
            include_artifacts,
        };
        tasks::list(&self.gateway.database, &owner(caller), query).await
    }
}

fn parse_op(message: &Value) -> Result<(&'static Op, Value), RpcError> {
    let shape = "message.parts must hold exactly one data part {\"data\": {\"op\": \"…\", \"params\": {…}}}";
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| RpcError::invalid_params(shape))?;
    let [part] = parts.as_slice() else {
        return Err(RpcError::invalid_params(shape));
    };
    let data = part
        .get("data")
        .and_then(Value::as_object)
        .ok_or_else(|| RpcError::invalid_params(shape))?;
    let name = data
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(shape))?;
    let op = registry::by_name(name).ok_or_else(|| RpcError::invalid_params(format!("unknown op '{name}'")))?;
    Ok((op, data.get("params").cloned().unwrap_or(Value::Null)))
}

fn string_param(params: &Value, name: &str) -> Result<Option<String>, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RpcError::invalid_params(format!("{name} must be a string"))),
    }
}

fn int_param(params: &Value, name: &str) -> Result<Option<i64>, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .map(Some)
            .ok_or_else(|| RpcError::invalid_params(format!("{name} must be an integer"))),
    }
}
