//! An MCP server over Streamable HTTP (`POST /v1/mcp`, `/v1/mcp/{install}`):
//! the tools of the caller's workspace, the prompts and resources its 0.2.0
//! tool servers offer ([`catalog`]) and its prompt-template installs as
//! prompts ([`templates`]), for any MCP client.
//!
//! Every POST carries one JSON-RPC message (or a batch, which the 2025-03-26
//! revision allows) and gets a JSON answer, which the transport permits in
//! place of an SSE stream. `initialize` opens a session ([`sessions`]): its
//! `Mcp-Session-Id` comes back on the answer, later requests may carry it,
//! and one naming a session that ended or expired gets 404, so the client
//! initializes again. A client that sends no session id is served without
//! one (stateless), except for what needs a session (`logging/setLevel`,
//! elicitation). A `tools/call` may answer as an SSE stream ([`stream`]),
//! which also carries a tool's questions to the client ([`elicit`]); the
//! client's answers are POSTed JSON-RPC responses. Sampling is never asked
//! of the client: a tool's model calls run through the gateway's metered
//! pipeline, billed to the caller, and are itemised in the result's `_meta`
//! (`initialize` declares this as an experimental capability). There is no
//! server-initiated stream, so `GET` answers 405 as the transport says. A
//! tool that fails answers a result with `isError`, never a transport
//! error: the model reading it can react. The JSON-RPC layer is
//! a handful of methods and small, so it lives here rather than behind a
//! full MCP SDK, which would also own the HTTP layer and its authentication.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

use tollgate_components::{CallError, Content, SkillError, mcp_content};

use super::Components;
use super::calls::{self, CallSite, SEPARATOR};
use super::skills::RunLedger;
use tollgate_identity::auth::{AuthState, Principal, ToolPolicy};

mod admission;
pub mod authorization;
mod catalog;
pub mod elicit;
mod remote;
pub mod sessions;
mod stream;
mod templates;

use admission::CallCounter;
use sessions::{LOG_LEVELS, Session};

/// The `_meta` key of a tool result that itemises the model calls the call
/// made through the gateway (docs/mcp.md, "Sampling").
pub const SERVICE_META: &str = "dev.tollgate/service";

/// The experimental server capability that says how sampling is served.
pub const SAMPLING_CAPABILITY: &str = "dev.tollgate/sampling";

/// The header that carries a session's id, both ways.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// Protocol revisions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The most messages one batch may hold (JSON-RPC batches exist only in the
/// 2025-03-26 revision). Each `tools/call` in it counts against the key's
/// rate and the plan, as a request of its own would.
pub const MAX_BATCH: usize = 32;
/// A batch starts no message after this long; the message running then
/// finishes within its own time limit (`components.wall_ms`).
pub const BATCH_DEADLINE: Duration = Duration::from_secs(60);

/// A server error (JSON-RPC's implementation-defined range) for a call the
/// key's rate or the workspace's plan refused.
const REFUSED: i64 = -32000;
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// Whom an MCP request serves. Owned, so a call whose answer streams can
/// run on a task of its own.
pub struct Scope {
    pub components: Arc<Components>,
    pub caller: Arc<Principal>,
    /// Counts a batch's further calls against the key's rate.
    pub auth: Arc<AuthState>,
    /// `/v1/mcp/{install}`: one install, with unprefixed tool names.
    pub only: Option<String>,
    /// The session the request named, once found.
    session: Option<Session>,
    /// The HTTP request's id (`x-request-id`): each tool call it carries is
    /// logged under a request id of its own, linked to this one.
    request_id: Option<String>,
    /// Where a tool call's log lines and progress reports go (a single
    /// request whose client takes an SSE answer).
    sinks: calls::Sinks,
}

impl Scope {
    pub fn new(
        components: Arc<Components>,
        caller: Arc<Principal>,
        auth: Arc<AuthState>,
        only: Option<String>,
    ) -> Self {
        Self {
            components,
            caller,
            auth,
            only,
            session: None,
            request_id: None,
            sinks: calls::Sinks::default(),
        }
    }

    /// The scope of the HTTP request `request_id`, whose tool calls are
    /// logged as its children.
    pub fn within(mut self, request_id: String) -> Self {
        self.request_id = Some(request_id);
        self
    }

    fn workspace_id(&self) -> &str {
        &self.caller.workspace_id
    }

    /// What the caller's key and role may reach (docs/mcp.md, "Tool policy").
    fn policy(&self) -> &ToolPolicy {
        &self.caller.tools
    }

    /// Whether the policy lets the caller use the tool `name`, as this
    /// scope names it (`<install>__<tool>`, or plain inside one install's).
    fn may_call(&self, name: &str) -> bool {
        match (self.only.as_deref(), name.split_once(SEPARATOR)) {
            (Some(only), _) => self.policy().allows(only, name),
            (None, Some((install, tool))) => self.policy().allows(install, tool),
            (None, None) => self.policy().is_open(),
        }
    }
}

pub async fn serve(mut scope: Scope, headers: &HeaderMap, body: &[u8]) -> Response {
    // An install the caller's tool policy keeps it from is answered as one
    // that does not exist, so a limited key cannot probe for names.
    if let Some(only) = scope.only.as_deref()
        && (!scope.policy().sees(only)
            || (scope.components.installs.get(scope.workspace_id(), only).is_none()
                && remote::in_scope(&scope).await.is_empty()))
    {
        let message = format!("no install named '{only}' in this workspace");
        return answer(StatusCode::NOT_FOUND, error(Value::Null, INVALID_REQUEST, &message));
    }
    let message: Value = match serde_json::from_slice(body) {
        Ok(message) => message,
        Err(e) => {
            let message = format!("the body is not JSON: {e}");
            return answer(StatusCode::BAD_REQUEST, error(Value::Null, PARSE_ERROR, &message));
        }
    };
    // A revision this server does not speak (a newer client probing, say)
    // gets a JSON-RPC error for its own id, so the client can fall back.
    if let Some(version) = headers.get("mcp-protocol-version")
        && !PROTOCOL_VERSIONS.iter().any(|v| version.as_bytes() == v.as_bytes())
    {
        let text = format!(
            "MCP-Protocol-Version {} is not supported (supported: {})",
            String::from_utf8_lossy(version.as_bytes()),
            PROTOCOL_VERSIONS.join(", ")
        );
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        return answer(StatusCode::BAD_REQUEST, error(id, INVALID_REQUEST, &text));
    }
    match session_of(&scope, headers).await {
        Ok(session) => scope.session = session,
        Err(refused) => return refused,
    }
    if is_initialize(&message) {
        return initialize(&scope, message).await;
    }
    let mut counter = CallCounter::default();
    match message {
        Value::Array(batch) if batch.len() > MAX_BATCH => {
            let text = format!(
                "a batch may hold at most {MAX_BATCH} messages; this one holds {}",
                batch.len()
            );
            answer(StatusCode::BAD_REQUEST, error(Value::Null, INVALID_REQUEST, &text))
        }
        Value::Array(batch) if !batch.is_empty() => {
            let deadline = tokio::time::Instant::now() + BATCH_DEADLINE;
            let mut replies = Vec::new();
            for message in batch {
                let reply = match tokio::time::Instant::now() < deadline {
                    true => handle(&scope, message, &mut counter).await,
                    false => late(&message),
                };
                replies.extend(reply);
            }
            match replies.is_empty() {
                true => StatusCode::ACCEPTED.into_response(),
                false => answer(StatusCode::OK, Value::Array(replies)),
            }
        }
        // The client's answer to a question a tool's call asked it.
        message if is_response(&message) => match elicit::reply(&scope, &message).await {
            Ok(()) => StatusCode::ACCEPTED.into_response(),
            Err((status, refusal)) => answer(status, refusal),
        },
        message if accepts_events(headers) && is_tool_call(&message) => stream::tool_call(scope, message).await,
        message => match handle(&scope, message, &mut counter).await {
            Some(reply) => {
                let status = match counter.refused {
                    true => StatusCode::TOO_MANY_REQUESTS,
                    false => StatusCode::OK,
                };
                answer(status, reply)
            }
            // Notifications and responses get 202 and no body.
            None => StatusCode::ACCEPTED.into_response(),
        },
    }
}

/// The live session the request names, if it names one: 404 for one that
/// ended, expired or is another workspace's, as the transport says, so the
/// client starts a new one.
async fn session_of(scope: &Scope, headers: &HeaderMap) -> Result<Option<Session>, Response> {
    let Some(id) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    let gone = || {
        let text = "this MCP session ended or expired; send initialize for a new one";
        answer(StatusCode::NOT_FOUND, error(Value::Null, INVALID_REQUEST, text))
    };
    let Ok(id) = id.to_str() else { return Err(gone()) };
    match scope.components.sessions.find(scope.workspace_id(), id).await {
        Ok(Some(session)) => Ok(Some(session)),
        Ok(None) => Err(gone()),
        Err(e) => {
            tracing::error!(error = %e, "reading an MCP session");
            let text = "the MCP session could not be read; retry";
            Err(answer(
                StatusCode::SERVICE_UNAVAILABLE,
                error(Value::Null, REFUSED, text),
            ))
        }
    }
}

/// Whether the client takes an SSE answer (the transport has it send
/// `Accept: application/json, text/event-stream`).
fn accepts_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|accept| accept.to_str().is_ok_and(|accept| accept.contains("text/event-stream")))
}

fn is_tool_call(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("tools/call") && message.get("id").is_some()
}

/// A JSON-RPC response (no method; a result or an error): from a client,
/// the answer to an elicitation.
fn is_response(message: &Value) -> bool {
    message.get("method").is_none() && (message.get("result").is_some() || message.get("error").is_some())
}

fn is_initialize(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("initialize") && message.get("id").is_some()
}

/// `initialize`: agrees a protocol revision and opens a session, whose id
/// goes back in the `Mcp-Session-Id` header.
async fn initialize(scope: &Scope, message: Value) -> Response {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return answer(StatusCode::OK, error(id, INVALID_REQUEST, "jsonrpc must be \"2.0\""));
    }
    let asked = message.pointer("/params/protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|asked| PROTOCOL_VERSIONS.contains(asked))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    // A client that can answer elicitations says so; only then may a tool's
    // call ask it (docs/mcp.md, "Elicitation").
    let elicitation = message
        .pointer("/params/capabilities/elicitation")
        .filter(|capability| capability.is_object());
    let session = match scope
        .components
        .sessions
        .open(scope.workspace_id(), version, elicitation)
        .await
    {
        Ok(session) => session,
        Err(e) => {
            tracing::error!(error = %e, "opening an MCP session");
            let text = "the MCP session could not be opened; retry";
            return answer(StatusCode::SERVICE_UNAVAILABLE, error(id, REFUSED, text));
        }
    };
    // Sampling is a client capability in MCP, and this server never asks
    // the client for it: a tool's model call is served by the gateway's own
    // metered pipeline, billed to the caller. Said here so a client knows.
    let mut capabilities = json!({"tools": {"listChanged": false}, "logging": {}});
    capabilities["experimental"][SAMPLING_CAPABILITY] =
        json!({"servedBy": "gateway", "billedTo": "caller", "clientSampling": false});
    catalog::capabilities(scope, &mut capabilities);
    // What a remote offers is known only by asking it, which initialize
    // does not wait for: with a remote in scope, prompts, resources and
    // completions are declared, and listed empty when no remote has any.
    if !remote::in_scope(scope).await.is_empty() {
        capabilities["prompts"] = json!({"listChanged": false});
        capabilities["resources"] = json!({"subscribe": false, "listChanged": false});
        capabilities["completions"] = json!({});
    }
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": "tollgate", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "The tools, skills, prompt templates and remote MCP servers installed in your Tollgate workspace. Tool names are <install>__<tool>; a skill is <install>__run; a prompt template is the prompt <install>__<install>; a remote server's tools and prompts are <name>__<tool>. Sampling: a tool that needs a model is served by the gateway's own metered pipeline and billed to your key (each model call itemised in the tool result's _meta \"dev.tollgate/service\"); the gateway never sends sampling/createMessage to the client."
    });
    let mut response = answer(StatusCode::OK, json!({"jsonrpc": "2.0", "id": id, "result": result}));
    if let Ok(value) = axum::http::HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// `logging/setLevel`: the least severe level of the log messages this
/// session's client wants. It needs a session to remember it in.
async fn set_log_level(scope: &Scope, params: &Value) -> Result<Value, (i64, String)> {
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .filter(|level| LOG_LEVELS.contains(level))
        .ok_or_else(|| {
            (
                INVALID_PARAMS,
                format!("params.level must be one of {}", LOG_LEVELS.join(", ")),
            )
        })?;
    let session = scope.session.as_ref().ok_or_else(|| {
        (
            INVALID_REQUEST,
            format!("logging/setLevel needs a session: send the {SESSION_HEADER} header that initialize answered"),
        )
    })?;
    scope
        .components
        .sessions
        .set_log_level(session, level)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "recording an MCP log level");
            (REFUSED, "the log level could not be recorded; retry".to_string())
        })?;
    Ok(json!({}))
}

/// A batch message not started before [`BATCH_DEADLINE`].
fn late(message: &Value) -> Option<Value> {
    let id = message.get("id").cloned()?;
    message.get("method")?;
    let text = format!("not run: the batch passed its {} s deadline", BATCH_DEADLINE.as_secs());
    Some(error(id, REFUSED, &text))
}

/// One JSON-RPC message; `None` when it needs no reply.
async fn handle(scope: &Scope, message: Value, counter: &mut CallCounter) -> Option<Value> {
    let Value::Object(message) = message else {
        return Some(error(Value::Null, INVALID_REQUEST, "a JSON-RPC message is an object"));
    };
    let id = message.get("id").cloned();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return match id {
            Some(id) if !message.contains_key("result") && !message.contains_key("error") => {
                Some(error(id, INVALID_REQUEST, "the message has no method"))
            }
            // A response from the client: the answer to an elicitation
            // (a batch gets no reply for it unless it is refused).
            _ => elicit::reply(scope, &Value::Object(message))
                .await
                .err()
                .map(|(_, refusal)| refusal),
        };
    };
    // Notifications (no id) are acknowledged and need no work here.
    let id = id?;
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(error(id, INVALID_REQUEST, "jsonrpc must be \"2.0\""));
    }
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let outcome = match method {
        "initialize" => Err((
            INVALID_REQUEST,
            "initialize must be sent alone, not in a batch".to_string(),
        )),
        "ping" => Ok(json!({})),
        "logging/setLevel" => set_log_level(scope, &params).await,
        "tools/list" => Ok(list_tools(scope).await),
        "tools/call" => match counter.admit(scope).await {
            Ok(()) => call_tool(scope, &params).await,
            Err(refused) => Err(refused),
        },
        "prompts/list" => Ok(catalog::list_prompts(scope).await),
        "resources/list" => Ok(catalog::list_resources(scope).await),
        "resources/templates/list" => Ok(catalog::list_templates(scope).await),
        // Each of these runs a component, so it is admitted as a tool call is.
        "prompts/get" | "resources/read" | "completion/complete" => match counter.admit(scope).await {
            Ok(()) => match method {
                "prompts/get" => catalog::get_prompt(scope, &params).await,
                "resources/read" => catalog::read_resource(scope, &params).await,
                _ => catalog::complete(scope, &params).await,
            },
            Err(refused) => Err(refused),
        },
        other => Err((METHOD_NOT_FOUND, format!("method '{other}' is not supported"))),
    };
    Some(match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => error(id, code, &message),
    })
}

async fn list_tools(scope: &Scope) -> Value {
    let mut tools: Vec<Value> = calls::list(&scope.components.installs, scope.workspace_id(), scope.only.as_deref())
        .into_iter()
        .filter(|tool| scope.may_call(&tool.name))
        .map(|tool| {
            let mut entry = json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": tool.input_schema,
            });
            if let Some(schema) = tool.output_schema {
                entry["outputSchema"] = schema;
            }
            if let Some(annotations) = tool.annotations {
                entry["annotations"] = annotations;
            }
            entry
        })
        .collect();
    tools.extend(remote::gather(scope, "tools/list", "tools").await);
    json!({ "tools": tools })
}

async fn call_tool(scope: &Scope, params: &Value) -> Result<Value, (i64, String)> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or((INVALID_PARAMS, "tools/call needs params.name".to_string()))?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(object @ Value::Object(_)) => object.clone(),
        Some(_) => return Err((INVALID_PARAMS, "params.arguments must be an object".into())),
    };
    // Decided on the name alone, so the answer is the same whether or not
    // a tool of that name exists.
    if !scope.may_call(name) {
        return Err((
            INVALID_PARAMS,
            format!("Unknown tool: {name} (this key's tool policy does not list it)"),
        ));
    }
    let Some(target) = calls::resolve(
        &scope.components.installs,
        scope.workspace_id(),
        scope.only.as_deref(),
        name,
    ) else {
        return match remote::resolve(scope, name).await {
            Some((server, tool)) => remote::call_tool(scope, &server, &tool, arguments).await,
            None => Err((INVALID_PARAMS, format!("Unknown tool: {name}"))),
        };
    };
    let site = CallSite {
        caller: scope.caller.clone(),
        parent_request_id: scope.request_id.clone(),
        depth: 0,
        ceiling: None,
    };
    let ledger = RunLedger::default();
    let sinks = calls::Sinks {
        models: Some(ledger.clone()),
        ..scope.sinks.clone()
    };
    let (request_id, outcome) =
        calls::call_with_sinks(&scope.components, &target, &site, arguments.to_string(), sinks).await;
    let mut result = tool_result(outcome);
    // The model calls the tool (0.4.0) or skill made, each billed to this
    // caller: itemised on the result, as a skill run over HTTP shows them.
    if !ledger.is_empty() {
        result["_meta"][SERVICE_META] = ledger.service(&request_id);
    }
    Ok(result)
}

/// A call's outcome as an MCP tool result: content parts (text, image,
/// audio, embedded resource; JSON as text), the structured answer when the
/// tool gave one JSON object, and `isError` on failure.
pub fn tool_result(outcome: Result<Vec<Content>, CallError>) -> Value {
    match outcome {
        Ok(parts) => {
            let mut structured = None;
            let content: Vec<Value> = parts
                .iter()
                .map(|part| {
                    if let Content::Json(text) = part
                        && parts.len() == 1
                        && let Ok(object @ Value::Object(_)) = serde_json::from_str::<Value>(text)
                    {
                        structured = Some(object);
                    }
                    mcp_content(part)
                })
                .collect();
            let mut result = json!({"content": content, "isError": false});
            if let Some(object) = structured {
                result["structuredContent"] = object;
            }
            result
        }
        Err(failure) => {
            let text = match &failure {
                CallError::Tool(error) => error.message.clone(),
                CallError::Skill(SkillError::Model(error)) => {
                    format!(
                        "a model call failed ({} {}): {}",
                        error.status, error.code, error.message
                    )
                }
                other => other.to_string(),
            };
            json!({"content": [{"type": "text", "text": text}], "isError": true})
        }
    }
}

/// 403 for a browser `Origin` that may not call the MCP endpoint.
pub fn foreign_origin(origin: &str) -> Response {
    let text = format!("Origin '{origin}' may not call this MCP server (control_plane.allowed_origins)");
    answer(StatusCode::FORBIDDEN, error(Value::Null, INVALID_REQUEST, &text))
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
