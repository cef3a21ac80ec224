//! The gateway side of the actor runtime ([`tollgate_actors::runtime::Host`]):
//! model calls go through the data plane in process, exactly like
//! `POST /v1/chat/completions` (wallet, fallback, metering, spans), with the
//! run's budget as a cost ceiling; tool and skill calls run the pinned
//! components in the sandbox; sub-actors load by id.

use std::sync::Arc;

use axum::body::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use tollgate_actors::ActorId;
use tollgate_actors::ir::{ComponentPin, Ir};
use tollgate_actors::runtime::{
    ComponentKind, Failure, Hold, Host, Meter, ModelAnswer, ModelCall, ToolAnswer, ToolCall, ToolSpec,
};
use tollgate_components::{CallError, Content};
use tollgate_core::money::Nanos;

use super::Actors;
use tollgate_gateway::pipeline::{self, Answer, ChatCall, ChatStream, Operation, Service, StreamEvent, StreamFailure};
use tollgate_gateway::{CeilingHold, CostCeiling};
use tollgate_identity::auth::{Caller, Principal};
use tollgate_tools::calls::{self, CallSite, Target};
use tollgate_tools::installs::{Active, Loaded};
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// One run's view of the gateway: who pays, and through which concerns.
pub struct GatewayHost {
    pub actors: Arc<Actors>,
    pub caller: Arc<Principal>,
}

/// The run's budget as the data plane's cost ceiling.
struct RunBudget(Meter);

impl CostCeiling for RunBudget {
    fn hold(&self, worst_case: Nanos) -> Result<Box<dyn CeilingHold>, String> {
        self.0.try_hold(worst_case.0).map(|hold| Box::new(Held(hold)) as Box<dyn CeilingHold>).map_err(|e| {
            format!(
                "The run's budget cannot cover this model call: it could cost up to {} USD, and {} USD of the budget remains",
                Nanos(e.worst_case).usd_string(),
                Nanos(e.remaining.max(0)).usd_string()
            )
        })
    }
}

struct Held(Hold);

impl CeilingHold for Held {
    fn settle(self: Box<Self>, billed: Nanos) {
        self.0.settle(billed.0);
    }
}

impl Host for GatewayHost {
    fn chat(&self, call: ModelCall) -> BoxFuture<'static, Result<ModelAnswer, Failure>> {
        let data = self.actors.data.clone();
        let caller = self.caller.clone();
        async move {
            let streamed = call.deltas.is_some();
            let mut body = Map::new();
            body.insert("model".into(), json!(call.candidates[0]));
            if call.candidates.len() > 1 {
                body.insert("models".into(), json!(call.candidates[1..]));
            }
            body.insert("messages".into(), Value::Array(call.messages));
            for (key, value) in call.params {
                body.insert(key, value);
            }
            if !call.tools.is_empty() {
                body.insert("tools".into(), Value::Array(call.tools));
            }
            if let Some(format) = call.response_format {
                body.insert("response_format".into(), format);
            }
            if streamed {
                body.insert("stream".into(), json!(true));
                body.insert("stream_options".into(), json!({"include_usage": true}));
            }
            let request_id = RequestId::new();
            let ceiling = RunBudget(call.budget);
            let body = Bytes::from(Value::Object(body).to_string());
            let site = pipeline::CallSite {
                request_id: &request_id,
                parent: Some(&call.parent_request_id),
                ceiling: Some(&ceiling),
                stream_failure: StreamFailure::Chunk,
                checked_as: Some(pipeline::GuardRoute::Actors),
            };
            let answer = data
                .run(Operation::Chat(ChatCall::body(body)), &Caller(caller), site)
                .await
                .map_err(|error| failure_of(&error))?;
            match answer {
                Answer::Stream(stream) => {
                    let deltas = call.deltas.expect("streamed calls have a sink");
                    read_stream(stream, &request_id.0, |text| deltas(text)).await
                }
                Answer::Whole(completion) => {
                    let message = completion.object["choices"][0]["message"].clone();
                    Ok(model_answer(message, &completion.service))
                }
                Answer::Media(_) => unreachable!("a chat answer is JSON or a stream"),
            }
        }
        .boxed()
    }

    fn tools(&self, pin: &ComponentPin, _kind: ComponentKind) -> BoxFuture<'static, Result<Vec<ToolSpec>, Failure>> {
        let actors = self.actors.clone();
        let caller = self.caller.clone();
        let pin = pin.clone();
        async move {
            let active = actors.component(&caller.workspace_id, &pin).await?;
            Ok(match &active.component {
                Loaded::Tool(server) => server
                    .tools()
                    .iter()
                    .map(|tool| ToolSpec {
                        name: tool.name.clone(),
                        description: tool.description.clone(),
                        input_schema: tool.input_schema.clone(),
                    })
                    .collect(),
                Loaded::Skill(skill) => {
                    let spec = skill.spec();
                    vec![ToolSpec {
                        name: calls::SKILL_TOOL.to_string(),
                        description: spec.description.clone(),
                        input_schema: spec.input_schema.clone(),
                    }]
                }
                // Guardrails and prompt templates offer no tools.
                Loaded::Guardrail(_) | Loaded::Prompt(_) => Vec::new(),
            })
        }
        .boxed()
    }

    fn call_tool(&self, call: ToolCall) -> BoxFuture<'static, Result<ToolAnswer, Failure>> {
        let actors = self.actors.clone();
        let caller = self.caller.clone();
        async move {
            let active = actors.component(&caller.workspace_id, &call.pin).await?;
            let target = Target {
                install: active,
                tool: call.tool,
            };
            let site = CallSite {
                caller,
                parent_request_id: Some(call.parent_request_id),
                depth: 1,
                ceiling: Some(Arc::new(RunBudget(call.budget))),
            };
            let (request_id, outcome) =
                calls::call_logged(&actors.components, &target, &site, call.arguments.to_string()).await;
            match outcome {
                Ok(contents) => Ok(ToolAnswer {
                    request_id,
                    output: output_of(&contents),
                    is_error: false,
                }),
                Err(CallError::Tool(error)) => Ok(ToolAnswer {
                    request_id,
                    output: Value::String(error.to_string()),
                    is_error: true,
                }),
                Err(other) => Err(Failure::new("tool_failed", other.to_string())),
            }
        }
        .boxed()
    }

    fn load_actor(&self, id: &ActorId) -> BoxFuture<'static, Result<Arc<Ir>, Failure>> {
        let actors = self.actors.clone();
        let id = id.clone();
        async move {
            actors
                .ir(&id)
                .await
                .map_err(|e| Failure::new("actor_unavailable", e.to_string()))
        }
        .boxed()
    }
}

impl Actors {
    /// The component a pin names: through the workspace's install (which
    /// must still run the pinned digest), or straight from the registry.
    async fn component(&self, workspace_id: &str, pin: &ComponentPin) -> Result<Arc<Active>, Failure> {
        let package = &pin.package;
        if let Some(install) = &pin.install {
            let active = self.components.installs().get(workspace_id, install).ok_or_else(|| {
                Failure::new(
                    "tool_failed",
                    format!("the install '{install}' this actor uses is gone from the workspace"),
                )
            })?;
            if active.record.digest != package.digest {
                return Err(Failure::new(
                    "tool_failed",
                    format!(
                        "the install '{install}' now runs {}@{}, not the {}@{} this actor pins; publish the actor again to pin it",
                        active.record.package, active.record.version, package.name, package.version
                    ),
                ));
            }
            return Ok(active);
        }
        self.components
            .installs()
            .pinned(&package.name, &package.version, &package.digest)
            .await
            .map_err(|e| Failure::new("tool_failed", e.to_string()))
    }
}

/// A tool's contents as one value: a lone JSON content parsed, else the
/// text joined (an image, audio or resource part as its MCP content object).
fn output_of(contents: &[Content]) -> Value {
    if let [Content::Json(json)] = contents
        && let Ok(value) = serde_json::from_str(json)
    {
        return value;
    }
    let text: Vec<String> = contents
        .iter()
        .map(|content| match content {
            Content::Text(text) | Content::Json(text) => text.clone(),
            other => tollgate_components::mcp_content(other).to_string(),
        })
        .collect();
    Value::String(text.join("\n"))
}

/// The billed facts of a model call, typed by the pipeline.
fn model_answer(message: Value, service: &Service) -> ModelAnswer {
    let usage = service.billed.usage;
    ModelAnswer {
        message,
        request_id: service.request_id.clone(),
        provider: service.provider().to_string(),
        model: service.model().to_string(),
        attempts: service.trail.to_json(),
        input_tokens: usage.map(|u| u.input),
        output_tokens: usage.map(|u| u.output),
        cost_nanos: service.cost().0,
    }
}

fn failure_of(error: &ApiError) -> Failure {
    Failure::new(error.code, error.message.clone())
}

/// Reads a chat stream: feeds content deltas to `on_text`, and assembles
/// the whole assistant message (tool calls included) and the billed facts
/// from its settled end.
async fn read_stream(
    mut stream: ChatStream,
    request_id: &str,
    mut on_text: impl FnMut(&str),
) -> Result<ModelAnswer, Failure> {
    let mut content = String::new();
    let mut tool_calls: Vec<Value> = Vec::new();
    let mut on_chunk = |chunk: &Value| {
        let delta = &chunk["choices"][0]["delta"];
        if let Some(text) = delta["content"].as_str()
            && !text.is_empty()
        {
            content.push_str(text);
            on_text(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            merge_tool_call(&mut tool_calls, call);
        }
    };
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Chunks(chunks) => {
                for chunk in chunks {
                    if let Ok(chunk) = serde_json::from_slice::<Value>(&chunk) {
                        on_chunk(&chunk);
                    }
                }
            }
            // Only an ingress dialect asks for a native stream.
            StreamEvent::Native(_) => {}
            StreamEvent::End(ending) => {
                if let Some(error) = &ending.error {
                    return Err(failure_of(error));
                }
                if let Some(chunk) = ending.chunk {
                    on_chunk(&Value::Object(chunk));
                }
                let mut message = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    message["tool_calls"] = Value::Array(tool_calls);
                }
                return Ok(model_answer(message, &ending.service));
            }
        }
    }
    Err(Failure::new(
        "stream_failed",
        format!("the model's stream for {request_id} ended before it was settled"),
    ))
}

/// Streamed tool calls come in pieces keyed by `index`: the id and name
/// once, the arguments as fragments to concatenate.
fn merge_tool_call(calls: &mut Vec<Value>, piece: &Value) {
    let index = piece["index"].as_u64().unwrap_or(0) as usize;
    while calls.len() <= index {
        calls.push(json!({"id": "", "type": "function", "function": {"name": "", "arguments": ""}}));
    }
    let call = &mut calls[index];
    if let Some(id) = piece["id"].as_str() {
        call["id"] = json!(id);
    }
    // Appended in place: copying the whole so far for each fragment would be
    // quadratic in a long call streamed in small pieces.
    for field in ["name", "arguments"] {
        if let Some(fragment) = piece["function"][field].as_str()
            && let Value::String(so_far) = &mut call["function"][field]
        {
            so_far.push_str(fragment);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_tool_calls_are_assembled_from_their_pieces() {
        let mut calls = Vec::new();
        let pieces = [
            json!({"index": 0, "id": "c1", "function": {"name": "calc__", "arguments": ""}}),
            json!({"index": 0, "function": {"name": "evaluate", "arguments": "{\"expr"}}),
            json!({"index": 1, "id": "c2", "function": {"name": "web__fetch", "arguments": "{}"}}),
            json!({"index": 0, "function": {"arguments": "ession\":\"2+2\"}"}}),
        ];
        for piece in &pieces {
            merge_tool_call(&mut calls, piece);
        }
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0]["id"], "c1");
        assert_eq!(calls[0]["function"]["name"], "calc__evaluate");
        assert_eq!(calls[0]["function"]["arguments"], "{\"expression\":\"2+2\"}");
        assert_eq!(calls[1]["function"]["name"], "web__fetch");
    }
}
