//! What a component may do on its caller's behalf: the `models` capability
//! (chat completions through the data plane, metered and billed to the
//! caller exactly like `POST /v1/chat/completions`) and the `tools`
//! capability (tools of the caller's workspace, one level deeper).

use std::sync::Arc;

use axum::body::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tollgate_components::{Capabilities, Content, Invocation, ModelAccess, ModelError, ToolAccess, ToolError};
use tollgate_core::money::Nanos;

use super::calls;
use super::installs::Installs;
use super::skills::{ModelCall, RunLedger};
use crate::auth::{Caller, Principal};
use crate::data_plane::{self, DataPlane};
use crate::server::RequestId;

/// Largest answer a component may read back from one model call.
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// The capabilities of one call made by `caller` at `depth`.
pub fn for_caller(
    data: &Arc<DataPlane>,
    installs: &Arc<Installs>,
    caller: &Arc<Principal>,
    parent_request_id: &str,
    depth: u32,
    ledger: RunLedger,
) -> Capabilities {
    Capabilities {
        models: Some(Arc::new(CallerModels {
            data: data.clone(),
            caller: caller.clone(),
            parent_request_id: parent_request_id.to_string(),
            ledger: ledger.clone(),
        })),
        tools: Some(Arc::new(CallerTools {
            data: data.clone(),
            installs: installs.clone(),
            caller: caller.clone(),
            parent_request_id: parent_request_id.to_string(),
            depth: depth + 1,
            ledger,
        })),
    }
}

struct CallerModels {
    data: Arc<DataPlane>,
    caller: Arc<Principal>,
    parent_request_id: String,
    ledger: RunLedger,
}

impl ModelAccess for CallerModels {
    fn chat(&self, request: String) -> BoxFuture<'static, Result<String, ModelError>> {
        let data = self.data.clone();
        let caller = self.caller.clone();
        let parent = self.parent_request_id.clone();
        let ledger = self.ledger.clone();
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
            let response =
                data_plane::chat_in_process(data, request_id.clone(), Caller(caller), Bytes::from(request)).await;
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
    data: Arc<DataPlane>,
    installs: Arc<Installs>,
    caller: Arc<Principal>,
    parent_request_id: String,
    depth: u32,
    ledger: RunLedger,
}

impl ToolAccess for CallerTools {
    fn call(&self, tool: String, arguments: String) -> BoxFuture<'static, Result<Vec<Content>, ToolError>> {
        let workspace = self.caller.workspace_id.clone();
        let Some(target) = calls::resolve(&self.installs, &workspace, None, &tool) else {
            let message = format!("no tool '{tool}' is installed in this workspace");
            return async move { Err(ToolError { message }) }.boxed();
        };
        let invocation = Invocation {
            request_id: self.parent_request_id.clone(),
            workspace,
            install: target.install.record.name.clone(),
            depth: self.depth,
        };
        let capabilities = for_caller(
            &self.data,
            &self.installs,
            &self.caller,
            &self.parent_request_id,
            self.depth,
            self.ledger.clone(),
        );
        async move {
            calls::call(&target, invocation, capabilities, arguments)
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
