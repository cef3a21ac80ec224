//! What a component may do on its caller's behalf: the `models` capability
//! (chat completions through the data plane, metered and billed to the
//! caller exactly like `POST /v1/chat/completions`; a skill's, a guardrail's
//! and a 0.4.0 tool server's) and the `tools` capability (tools of the
//! caller's workspace, one level deeper; a skill's only).

use std::sync::Arc;

use axum::body::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tollgate_components::{Capabilities, Content, ModelAccess, ModelError, ToolAccess, ToolError};

use super::Components;
use super::calls::{self, CallSite};
use super::skills::{ModelCall, RunLedger};
use tollgate_gateway::CostCeiling;
use tollgate_gateway::pipeline::{self, Answer, ChatCall, Operation, StreamFailure};
use tollgate_identity::auth::{Caller, Principal};
use tollgate_web::server::RequestId;

/// Largest answer a component may read back from one model call.
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// The capabilities of a skill run `run_request_id`, made by `caller` at
/// `depth`: its model and tool calls are logged as running inside it.
pub fn for_caller(
    components: &Arc<Components>,
    caller: &Arc<Principal>,
    run_request_id: &str,
    depth: u32,
    ledger: RunLedger,
    ceiling: Option<Arc<dyn CostCeiling>>,
) -> Capabilities {
    Capabilities {
        models: Some(Arc::new(CallerModels {
            components: components.clone(),
            caller: caller.clone(),
            parent_request_id: run_request_id.to_string(),
            ledger,
            ceiling: ceiling.clone(),
            checked_as: Some(pipeline::GuardRoute::Chat),
        })),
        tools: Some(Arc::new(CallerTools {
            components: components.clone(),
            site: Arc::new(CallSite {
                caller: caller.clone(),
                parent_request_id: Some(run_request_id.to_string()),
                depth: depth + 1,
                ceiling,
            }),
        })),
    }
}

/// A guardrail's capabilities: model calls (a judge) billed to the caller
/// and logged inside the checked request, which no guardrail checks again.
pub fn for_guardrail(components: &Arc<Components>, caller: &Arc<Principal>, request_id: &str) -> Capabilities {
    Capabilities {
        models: Some(Arc::new(CallerModels {
            components: components.clone(),
            caller: caller.clone(),
            parent_request_id: request_id.to_string(),
            ledger: RunLedger::default(),
            ceiling: None,
            checked_as: None,
        })),
        tools: None,
    }
}

/// A 0.4.0 tool server's model access for tool call `call_request_id`:
/// billed to the caller of the tool call like a skill's (wallet, budgets,
/// the actor run's ceiling), checked by the chat guardrails, and logged
/// inside the tool call. Never sent back to the MCP client as sampling.
pub fn tool_models(
    components: &Arc<Components>,
    caller: &Arc<Principal>,
    call_request_id: &str,
    ledger: RunLedger,
    ceiling: Option<Arc<dyn CostCeiling>>,
) -> Arc<dyn ModelAccess> {
    Arc::new(CallerModels {
        components: components.clone(),
        caller: caller.clone(),
        parent_request_id: call_request_id.to_string(),
        ledger,
        ceiling,
        checked_as: Some(pipeline::GuardRoute::Chat),
    })
}

struct CallerModels {
    components: Arc<Components>,
    caller: Arc<Principal>,
    parent_request_id: String,
    ledger: RunLedger,
    /// The budget of the actor run this skill runs in, if any.
    ceiling: Option<Arc<dyn CostCeiling>>,
    /// How the workspace's guardrails check these calls: as chat for a
    /// skill's, not at all for a guardrail's own (a judge's call would
    /// otherwise be checked by the judge).
    checked_as: Option<pipeline::GuardRoute>,
}

impl ModelAccess for CallerModels {
    fn chat(&self, request: String) -> BoxFuture<'static, Result<String, ModelError>> {
        let data = self.components.data.clone();
        let caller = self.caller.clone();
        let parent = self.parent_request_id.clone();
        let ledger = self.ledger.clone();
        let ceiling = self.ceiling.clone();
        let checked_as = self.checked_as;
        async move {
            let body: Value = serde_json::from_str(&request)
                .map_err(|e| model_error(400, "invalid_json", format!("the request is not JSON: {e}")))?;
            if body.get("stream").and_then(Value::as_bool) == Some(true) {
                return Err(model_error(
                    400,
                    "stream_not_supported",
                    "components receive whole answers: leave out \"stream\"".into(),
                ));
            }
            let request_id = RequestId::new();
            tracing::info!(parent_request_id = %parent, request_id = %request_id.0, "component model call");
            let site = pipeline::CallSite {
                request_id: &request_id,
                parent: Some(&parent),
                ceiling: ceiling.as_deref(),
                stream_failure: StreamFailure::Chunk,
                checked_as,
            };
            let answer = data
                .run(
                    Operation::Chat(ChatCall::body(Bytes::from(request))),
                    &Caller(caller),
                    site,
                )
                .await
                .map_err(|error| model_error(error.status.as_u16(), error.code, error.message))?;
            let Answer::Whole(completion) = answer else {
                // `stream` was refused above, so the pipeline answers whole.
                return Err(model_error(500, "internal_error", "a whole answer was expected".into()));
            };
            let service = &completion.service;
            ledger.record(ModelCall {
                request_id: request_id.0.to_string(),
                provider: service.provider().to_string(),
                model: service.model().to_string(),
                cost: service.cost(),
            });
            let bytes = completion.render();
            if bytes.len() > MAX_ANSWER_BYTES {
                return Err(model_error(
                    502,
                    "answer_too_large",
                    format!(
                        "the answer is {} bytes; a component reads at most {MAX_ANSWER_BYTES}",
                        bytes.len()
                    ),
                ));
            }
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
        .boxed()
    }
}

struct CallerTools {
    components: Arc<Components>,
    /// The calling skill run, one level deeper.
    site: Arc<CallSite>,
}

impl ToolAccess for CallerTools {
    fn call(&self, tool: String, arguments: String) -> BoxFuture<'static, Result<Vec<Content>, ToolError>> {
        let components = self.components.clone();
        let site = self.site.clone();
        async move {
            let workspace = &site.caller.workspace_id;
            // The caller's tool policy holds inside its skill's run too, so
            // a skill cannot be a way round it.
            let allowed = tool
                .split_once(calls::SEPARATOR)
                .map_or(site.caller.tools.is_open(), |(install, name)| {
                    site.caller.tools.allows(install, name)
                });
            if !allowed {
                return Err(ToolError {
                    message: format!(
                        "no tool '{tool}' is installed in this workspace that this caller's tool policy lists"
                    ),
                });
            }
            let Some(target) = calls::resolve(&components.installs, workspace, None, &tool) else {
                return remote_call(&components, &site, &tool, arguments).await;
            };
            calls::call(&components, &target, &site, arguments)
                .await
                .map_err(|failure| ToolError {
                    message: failure.to_string(),
                })
        }
        .boxed()
    }
}

/// A skill's call of a remote MCP server's tool (`<remote>__<tool>`): its
/// text parts as text, any other part as its MCP JSON; a result with
/// `isError`, or none, is the tool's error.
async fn remote_call(
    components: &Arc<Components>,
    site: &CallSite,
    name: &str,
    arguments: String,
) -> Result<Vec<Content>, ToolError> {
    let unknown = || ToolError {
        message: format!("no tool '{name}' is installed in this workspace"),
    };
    let (server, tool) = name.split_once(calls::SEPARATOR).ok_or_else(unknown)?;
    let remotes = components.installs().remotes();
    let server = match remotes.get(&site.caller.workspace_id, server).await {
        Ok(Some(server)) => server,
        Ok(None) => return Err(unknown()),
        Err(error) => {
            return Err(ToolError {
                message: error.to_string(),
            });
        }
    };
    let arguments = serde_json::from_str(&arguments).map_err(|e| ToolError {
        message: format!("the arguments are not JSON: {e}"),
    })?;
    let result = crate::remote::calls::call(components, site, &server, tool, arguments)
        .await
        .map_err(|refusal| ToolError {
            message: refusal.to_string(),
        })?;
    let parts = result
        .get("content")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    let content: Vec<Content> = parts
        .into_iter()
        .map(|part| match part.get("type").and_then(serde_json::Value::as_str) {
            Some("text") => Content::Text(part["text"].as_str().unwrap_or_default().to_string()),
            _ => Content::Json(part.to_string()),
        })
        .collect();
    if result.get("isError") == Some(&serde_json::Value::Bool(true)) {
        let texts: Vec<String> = content
            .iter()
            .filter_map(|part| match part {
                Content::Text(text) => Some(text.clone()),
                _ => None,
            })
            .collect();
        return Err(ToolError {
            message: texts.join("\n"),
        });
    }
    Ok(content)
}

fn model_error(status: u16, code: &str, message: String) -> ModelError {
    ModelError {
        status,
        code: code.to_string(),
        message,
    }
}
