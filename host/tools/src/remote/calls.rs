//! A remote MCP server's tool called on a caller's behalf, as a component's
//! tool is (`crate::calls`): under a request id of its own, through the
//! workspace's tool guardrails on its arguments and its result, and logged
//! as a `tool_call` row (linked to the request it ran inside, for a
//! skill's call). Admission is the caller's: the MCP endpoint admits each
//! call, a skill's run was admitted as a whole.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tollgate_components::{CallError, ComponentFault, ToolError};
use tollgate_core::db::now_ms;
use tollgate_gateway::guards::{self, AnswerOutcome, Checks};
use tollgate_ledger::RequestKind;
use tollgate_web::server::RequestId;

use super::ServerRecord;
use super::client::RemoteError;
use crate::Components;
use crate::calls::{self, CallSite, Logged, SEPARATOR};

/// Calls `tool` on `server` with `arguments` (a JSON object): the remote's
/// MCP result as it answered it (`isError` included), or why there is none.
pub async fn call(
    components: &Arc<Components>,
    site: &CallSite,
    server: &ServerRecord,
    tool: &str,
    arguments: Value,
) -> Result<Value, Refusal> {
    let request_id = RequestId::new();
    let name = format!("{}{SEPARATOR}{tool}", server.name);
    let started = (now_ms(), Instant::now());
    let mut arguments = arguments.to_string();
    let outcome = match calls::guarded_arguments(components, site, &name, &request_id.0, &mut arguments).await {
        Err(refused) => Err(Refusal::Guard(refused)),
        Ok(checks) => {
            let arguments: Value = serde_json::from_str(&arguments).unwrap_or_else(|_| json!({}));
            let params = json!({"name": tool, "arguments": arguments});
            let remotes = components.installs.remotes();
            match (remotes.request(server, "tools/call", params).await, checks) {
                (Ok(result), Some(mut checks)) if checks.checks_responses() => {
                    checked(&mut checks, result).await.map_err(Refusal::Guard)
                }
                (outcome, _) => outcome.map_err(Refusal::Remote),
            }
        }
    };
    // What the log records: a tool error when the remote's tool failed or
    // it refused the call, a fault when it could not be had at all.
    let failure = match &outcome {
        Ok(result) if result.get("isError") == Some(&json!(true)) => {
            Some(tool_error("the remote tool answered an error"))
        }
        Ok(_) => None,
        Err(Refusal::Guard(refused)) => Some(tool_error(&refused.to_string())),
        Err(Refusal::Remote(RemoteError::Rpc { message, .. })) => Some(tool_error(message)),
        Err(Refusal::Remote(error)) => Some(CallError::Fault(ComponentFault {
            component: name.as_str().into(),
            reason: error.to_string(),
        })),
    };
    let logged = Logged {
        kind: RequestKind::ToolCall,
        request_id: &request_id.0,
        site,
        name,
        provider: &server.url,
        version: crate::remote::client::CLIENT_VERSION,
        streamed: false,
    };
    logged.record_in_background(components, failure.as_ref(), started);
    outcome
}

/// A remote's tool result through the answer guardrails, as a component's
/// is: each text part and embedded text resource is one text, and a rewrite
/// replaces them in place. A rewritten result loses its
/// `structuredContent`, which would otherwise still hold what was rewritten.
async fn checked(checks: &mut Checks, mut result: Value) -> Result<Value, CallError> {
    fn slots(result: &mut Value) -> Vec<&mut Value> {
        let Some(Value::Array(parts)) = result.get_mut("content") else {
            return Vec::new();
        };
        parts
            .iter_mut()
            .filter_map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => part.get_mut("text"),
                Some("resource") => part.pointer_mut("/resource/text"),
                _ => None,
            })
            .filter(|text| text.is_string())
            .collect()
    }
    let texts: Vec<String> = slots(&mut result)
        .iter()
        .map(|text| text.as_str().unwrap_or_default().to_string())
        .collect();
    let passed = match checks.answer(texts.clone(), true, false).await {
        Ok(AnswerOutcome::Pass(passed)) => passed,
        Ok(AnswerOutcome::Retry(reason)) => {
            return Err(calls::guard_refusal(guards::denied("guardrail", "result", &reason)));
        }
        Err(refused) => return Err(calls::guard_refusal(refused)),
    };
    if passed != texts {
        for (slot, text) in slots(&mut result).into_iter().zip(passed) {
            *slot = Value::String(text);
        }
        if let Some(object) = result.as_object_mut() {
            object.remove("structuredContent");
        }
    }
    Ok(result)
}

/// Why a remote call has no result.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A tool guardrail refused the arguments or the result.
    #[error("{0}")]
    Guard(CallError),
    #[error("remote MCP server: {0}")]
    Remote(RemoteError),
}

fn tool_error(message: &str) -> CallError {
    CallError::Tool(ToolError {
        message: message.to_string(),
    })
}
