//! `POST /a2a`: JSON-RPC 2.0 (single or batch) carrying the A2A v1.0 core
//! methods and the control-plane extension methods. Written on axum + serde
//! rather than a JSON-RPC framework because A2A needs the HTTP headers
//! (`Authorization`, `A2A-Version`) of each call.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ControlPlane;
use super::error::{OpError, RpcError};
use super::registry::{self, Op};
use super::{card, protojson, tasks};
use tollgate_core::db::new_id;
use tollgate_identity::auth::{AuthState, KeyScope, Principal};

const MAX_BATCH: usize = 100;

pub async fn endpoint(
    State(control): State<Arc<ControlPlane>>,
    State(auth): State<Arc<AuthState>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
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
    if let Some(origin) = control.foreign_origin(&headers) {
        return reply(
            StatusCode::FORBIDDEN,
            error_response(Value::Null, &foreign_origin(&origin)),
        );
    }
    if let Some(content_type) = unsupported_content_type(&headers) {
        let error = RpcError::content_type_not_supported(&content_type);
        return reply(StatusCode::UNSUPPORTED_MEDIA_TYPE, error_response(Value::Null, &error));
    }
    let caller = match authenticate(&control, &auth, &headers).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let version = version(&headers);
    let request = match parse_body(&body) {
        Ok(request) => request,
        Err(error) => return reply(StatusCode::OK, error_response(Value::Null, &error)),
    };
    let client_ip = tollgate_web::rate_limit::client_ip(
        peer.map(|Extension(ConnectInfo(address))| address.ip()),
        &headers,
        &control.config.trusted_proxies,
    );
    let call = Call {
        base_url: control.public_url(Some(&headers)),
        control,
        caller,
        client_ip,
        version,
    };
    match request {
        Body::Batch(entries) => {
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
        Body::Single(single) => match call.entry(single).await {
            Some(response) => reply(StatusCode::OK, response),
            None => StatusCode::NO_CONTENT.into_response(),
        },
    }
}

/// A JSON-RPC body: one entry, or a batch of 1 to `MAX_BATCH` entries. The
/// entries are not checked yet ([`parse_entry`] does that, one at a time).
#[derive(Debug)]
pub enum Body {
    Single(Value),
    Batch(Vec<Value>),
}

/// Parses the HTTP body. An error is answered as a whole, with id null.
pub fn parse_body(body: &[u8]) -> Result<Body, RpcError> {
    match serde_json::from_slice(body).map_err(RpcError::parse_error)? {
        Value::Array(entries) if entries.is_empty() => Err(RpcError::invalid_request("Empty batch")),
        Value::Array(entries) if entries.len() > MAX_BATCH => Err(RpcError::invalid_request(format!(
            "A batch holds at most {MAX_BATCH} requests"
        ))),
        Value::Array(entries) => Ok(Body::Batch(entries)),
        single => Ok(Body::Single(single)),
    }
}

/// One entry's envelope, checked: what to call, and the id to answer with.
#[derive(Debug)]
pub struct Request {
    /// `None` for a notification, which gets no response.
    pub id: Option<Value>,
    pub method: String,
    /// Always an object (an absent or null `params` is `{}`).
    pub params: Value,
}

/// Checks one entry's envelope. A bad one is answered (notification or not)
/// with the returned error and id.
pub fn parse_entry(entry: Value) -> Result<Request, (Value, RpcError)> {
    let Value::Object(mut object) = entry else {
        return Err((
            Value::Null,
            RpcError::invalid_request("A request must be a JSON object"),
        ));
    };
    let id = match object.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::invalid_request("id must be a string, a number or null"),
            ));
        }
    };
    let respond_id = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err((respond_id, RpcError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let Some(Value::String(method)) = object.remove("method") else {
        return Err((respond_id, RpcError::invalid_request("method must be a string")));
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params,
        Some(Value::Array(_)) => {
            return Err((
                respond_id,
                RpcError::invalid_params("params must be an object (by-name), not an array"),
            ));
        }
        Some(_) => {
            return Err((
                respond_id,
                RpcError::invalid_request("params must be an object or an array"),
            ));
        }
    };
    Ok(Request { id, method, params })
}

fn reply(status: StatusCode, body: Value) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The error for a browser origin that may not call this endpoint
/// (`control_plane.allowed_origins`).
pub fn foreign_origin(origin: &str) -> RpcError {
    RpcError::new(
        super::error::OPERATION_FAILED,
        format!("Origin '{origin}' may not call this endpoint (control_plane.allowed_origins)"),
        "PERMISSION_DENIED",
        super::error::TOLLGATE_DOMAIN,
    )
}

fn error_response(id: Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

/// The request's `Content-Type` when it is not JSON (`application/json` or an
/// `application/*+json` type, any parameters). An absent header is taken as
/// JSON, so minimal clients keep working.
pub fn unsupported_content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?;
    let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
    let essence = text.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let json = essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|subtype| subtype.ends_with("+json"));
    (!json).then_some(text)
}

/// No key is fine (only `accounts.signup` and discovery work without one); a
/// key that does not resolve fails the whole HTTP request with 401.
#[cfg_attr(not(feature = "a2a-conformance"), allow(unused_variables))]
async fn authenticate(
    control: &ControlPlane,
    auth: &AuthState,
    headers: &HeaderMap,
) -> Result<Option<Arc<Principal>>, Response> {
    let unauthorized = |message: &str| {
        let error = RpcError::new(
            super::error::OPERATION_FAILED,
            message,
            "UNAUTHENTICATED",
            super::error::TOLLGATE_DOMAIN,
        );
        let mut response = reply(StatusCode::UNAUTHORIZED, error_response(Value::Null, &error));
        // Every refusal here follows a credential that was sent.
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            tollgate_web::error::bearer_challenge(Some("invalid_token")),
        );
        response
    };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        // The console's calls carry its session cookie and CSRF header instead.
        match auth.session(headers).await {
            Ok(Some(principal)) => return Ok(Some(principal)),
            Ok(None) => {}
            Err(tollgate_identity::auth::SessionError::Refused(
                tollgate_identity::auth::sessions::SessionRefusal::Invalid,
            )) => {
                return Err(unauthorized("The console session has expired or ended; sign in again."));
            }
            Err(tollgate_identity::auth::SessionError::Refused(
                tollgate_identity::auth::sessions::SessionRefusal::Csrf,
            )) => {
                let error = RpcError::new(
                    super::error::OPERATION_FAILED,
                    "A call authenticated by the console session cookie must send its X-CSRF-Token header.",
                    "PERMISSION_DENIED",
                    super::error::TOLLGATE_DOMAIN,
                );
                return Err(reply(StatusCode::FORBIDDEN, error_response(Value::Null, &error)));
            }
            Err(tollgate_identity::auth::SessionError::Internal(e)) => {
                tracing::error!(error = %e, "session lookup failed");
                return Err(reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    error_response(Value::Null, &RpcError::internal()),
                ));
            }
        }
        #[cfg(feature = "a2a-conformance")]
        if control.conformance_mode() {
            return Ok(Some(super::conformance::sandbox_principal()));
        }
        return Ok(None);
    };
    let secret = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or_else(|| unauthorized("The Authorization header must be 'Bearer <API key>'."))?;
    match auth.resolve(secret).await {
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
pub fn version(headers: &HeaderMap) -> Result<(), RpcError> {
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

/// Who owns the tasks a caller creates, which is also who may read them: the
/// key's scope. A user-scoped key's tasks are its user's; a key confined to
/// one workspace sees only tasks made by the user's keys confined to that same
/// workspace, so it cannot read what the user did elsewhere; a user-less key
/// sees only its own.
fn owner(principal: &Principal) -> String {
    match (&principal.user_id, principal.scope) {
        (None, _) => format!("key:{}", principal.key_id),
        (Some(user), KeyScope::User) => user.clone(),
        (Some(user), KeyScope::Workspace) => format!("{user}@{}", principal.workspace_id),
    }
}

struct Call {
    base_url: String,
    control: Arc<ControlPlane>,
    caller: Option<Arc<Principal>>,
    client_ip: Option<IpAddr>,
    version: Result<(), RpcError>,
}

impl Call {
    /// One JSON-RPC entry; `None` for a notification (no `id`).
    async fn entry(&self, entry: Value) -> Option<Value> {
        let Request { id, method, params } = match parse_entry(entry) {
            Ok(request) => request,
            Err((id, error)) => return Some(error_response(id, &error)),
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
        if let Some(op) = registry::by_method(method) {
            // Extension methods take the op's own params, which are not proto messages.
            return registry::run(op, &self.control, self.caller.clone(), self.client_ip, params)
                .await
                .map_err(OpError::into_rpc);
        }
        let params = protojson::json_names(params)?;
        match method {
            "SendMessage" => self.send_message(params).await,
            "GetTask" => self.get_task(params).await,
            "ListTasks" => self.list_tasks(params).await,
            "CancelTask" => {
                let caller = self.require_caller()?;
                let id = string_param(&params, "id")?.ok_or_else(|| RpcError::invalid_params("id is required"))?;
                tasks::cancel(&self.control.tasks, &owner(caller), &id).await
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
            other => Err(RpcError::method_not_found(other)),
        }
    }

    /// Exactly one data part `{"op", "params"}` → a COMPLETED or FAILED task.
    async fn send_message(&self, params: Value) -> Result<Value, RpcError> {
        let message = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| RpcError::invalid_params("message is required"))?;
        let history_length = match params.get("configuration") {
            None | Some(Value::Null) => None,
            Some(configuration @ Value::Object(_)) => int_param(configuration, "historyLength")?,
            Some(_) => return Err(RpcError::invalid_params("configuration must be an object")),
        };
        let (op, op_params) = match parse_op(message) {
            Ok(parsed) => parsed,
            #[cfg(feature = "a2a-conformance")]
            Err(_) if self.control.conformance_mode() => {
                let caller = self.require_caller()?;
                let mut result = super::conformance::send(&self.control.tasks, &owner(caller), &params).await?;
                if let Some(task) = result.get_mut("task") {
                    tasks::trim_history(task, history_length)?;
                }
                return Ok(result);
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
            tasks::load(&self.control.tasks, &owner(caller), task_id).await?;
            return Err(RpcError::unsupported(format!(
                "Task '{task_id}' is in a terminal state; send a new message without taskId"
            )));
        }
        // A data part is a protobuf `Struct`, whose numbers are all doubles.
        let op_params = protojson::integral_numbers(op_params);
        let outcome = registry::run(op, &self.control, self.caller.clone(), self.client_ip, op_params).await;
        let mut task = tasks::op_task(op.name, message, &context_id, &outcome);
        let owner = match (&self.caller, &outcome) {
            (Some(caller), _) => Some(owner(caller)),
            // A sign-up's task belongs to the user it created.
            (None, Ok(result)) => result["user_id"].as_str().map(str::to_string),
            (None, Err(_)) => None,
        };
        if let Some(owner) = owner {
            tasks::save(&self.control.tasks, &owner, &task).await.map_err(|e| {
                tracing::error!("saving task: {e}");
                RpcError::internal()
            })?;
        }
        tasks::trim_history(&mut task, history_length)?;
        Ok(json!({ "task": task }))
    }

    async fn get_task(&self, params: Value) -> Result<Value, RpcError> {
        let caller = self.require_caller()?;
        let id = string_param(&params, "id")?.ok_or_else(|| RpcError::invalid_params("id is required"))?;
        let mut task = tasks::load(&self.control.tasks, &owner(caller), &id).await?;
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
        tasks::list(&self.control.tasks, &owner(caller), query).await
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

/// An integer field; proto3 JSON allows a number or a decimal string.
fn int_param(params: &Value, name: &str) -> Result<Option<i64>, RpcError> {
    let invalid = || RpcError::invalid_params(format!("{name} must be an integer"));
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => text.parse().map(Some).map_err(|_| invalid()),
        Some(value) => value.as_i64().map(Some).ok_or_else(invalid),
    }
}
