//! What a component may do on its caller's behalf: the `models` capability
//! (chat completions through the data plane, metered and billed to the
//! caller exactly like `POST /v1/chat/completions`) and the `tools`
//! capability (tools of the caller's workspace, one level deeper).

use std::sync::Arc;

use axum::body::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tollgate_components::{Capabilities, Content, ModelAccess, ModelError, ToolAccess, ToolError};
use tollgate_core::money::Nanos;

use super::Components;
use super::calls::{self, CallSite};
use super::skills::{ModelCall, RunLedger};
use crate::auth::{Caller, Principal};
use crate::data_plane::{self, CostCeiling};
use crate::server::RequestId;

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

struct CallerModels {
    components: Arc<Components>,
    caller: Arc<Principal>,
    parent_request_id: String,
    ledger: RunLedger,
    /// The budget of the actor run this skill runs in, if any.
    ceiling: Option<Arc<dyn CostCeiling>>,
}

impl ModelAccess for CallerModels {
    fn chat(&self, request: String) -> BoxFuture<'static, Result<String, ModelError>> {
        let data = self.components.data.clone();
        let caller = self.caller.clone();
        let parent = self.parent_request_id.clone();
        let ledger = self.ledger.clone();
        let ceiling = self.ceiling.clone();
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
            let response = data_plane::chat_in_process(
                data,
                request_id.clone(),
                &parent,
                ceiling.as_deref(),
                Caller(caller),
                Bytes::from(request),
            )
            .await;
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
                .await
                .map_err(|e| {
                    model_error(
                        502,
                        "answer_unreadable",
                        format!("the gateway's answer could not be read: {e}"),
                    )
                })?;
            let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if !(200..300).contains(&status) {
                let error = &answer["error"];
                return Err(model_error(
                    status,
                    error["code"].as_str().unwrap_or("model_call_failed"),
                    error["message"].as_str().unwrap_or("the model call failed").to_string(),
                ));
            }
            let service = &answer["service"];
            ledger.record(ModelCall {
                request_id: request_id.0.to_string(),
                provider: service["provider"].as_str().unwrap_or_default().to_string(),
                model: service["model"].as_str().unwrap_or_default().to_string(),
                cost: service["cost_usd"]
                    .as_str()
                    .and_then(|usd| Nanos::from_usd(usd).ok())
                    .unwrap_or(Nanos::ZERO),
            });
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
            let Some(target) = calls::resolve(&components.installs, workspace, None, &tool) else {
                return Err(ToolError {
                    message: format!("no tool '{tool}' is installed in this workspace"),
                });
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

fn model_error(status: u16, code: &str, message: String) -> ModelError {
    ModelError {
        status,
        code: code.to_string(),
        message,
    }
}
