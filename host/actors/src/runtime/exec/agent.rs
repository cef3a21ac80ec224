//! The `agent` step: a loop of model calls in which the model may call the
//! actor's tools and skills, until it answers without a tool call or runs
//! out of iterations. A tool's failure goes back to the model rather than
//! stopping the run, so the model can correct itself.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Frame;
use super::model::{Ask, content_text, model_call, opening_messages};
use super::tools::{TOOL_SEPARATOR, emit_result};
use crate::ir::AgentStep;
use crate::provenance::{StepTrail, ToolCallTrail, digest};
use crate::runtime::shared::Shared;
use crate::runtime::{ComponentKind, Host, RunError, RunEvent, ToolCall};

pub(super) async fn agent_step<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &mut Frame,
    step: &str,
    agent: &AgentStep,
    record: &mut StepTrail,
) -> Result<Value, RunError> {
    let mut messages = opening_messages(shared, frame, step, agent.system.as_ref(), &agent.prompt).await?;
    record.input_digest = Some(digest(&Value::Array(messages.clone())));
    // Offer every tool of each named server (and each skill as `<alias>__run`).
    let mut offered = Vec::new();
    for alias in &agent.tools {
        let (pin, kind) = match (frame.ir.tools.get(alias), frame.ir.skills.get(alias)) {
            (Some(pin), _) => (pin.clone(), ComponentKind::ToolServer),
            (None, Some(pin)) => (pin.clone(), ComponentKind::Skill),
            (None, None) => {
                return Err(shared.error(
                    "actor_unavailable",
                    format!("The actor has no tool or skill '{alias}'."),
                    step,
                ));
            }
        };
        for spec in shared.bounded(step, shared.host.tools(&pin, kind)).await? {
            offered.push(json!({
                "type": "function",
                "function": {
                    "name": format!("{alias}{TOOL_SEPARATOR}{}", spec.name),
                    "description": spec.description,
                    "parameters": spec.input_schema,
                },
            }));
        }
    }
    for _ in 0..agent.max_iterations {
        let answer = model_call(
            shared,
            frame,
            step,
            &agent.model,
            Ask {
                messages: messages.clone(),
                tools: offered.clone(),
                response_format: None,
            },
            record,
        )
        .await?;
        let calls = answer.message["tool_calls"].as_array().cloned().unwrap_or_default();
        let mut assistant = answer.message.clone();
        if let Some(object) = assistant.as_object_mut() {
            object.insert("role".into(), json!("assistant"));
        }
        messages.push(assistant);
        if calls.is_empty() {
            return Ok(Value::String(content_text(&answer.message)));
        }
        for call in calls {
            let name = call["function"]["name"].as_str().unwrap_or_default().to_string();
            let arguments: Value = call["function"]["arguments"]
                .as_str()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or_else(|| json!({}));
            let result = agent_tool_call(shared, frame, step, &name, arguments, record).await?;
            messages.push(json!({
                "role": "tool",
                "tool_call_id": call["id"],
                "content": match result { Value::String(text) => text, other => other.to_string() },
            }));
        }
    }
    Err(shared.error(
        "max_iterations",
        format!(
            "The run stopped at step '{step}': the agent was still calling tools after {} iterations.",
            agent.max_iterations
        ),
        step,
    ))
}

/// One tool call an agent's model asked for. A tool that answers with an
/// error, or a name that is not offered, goes back to the model as the
/// result, so it can correct itself; only the run's own limits stop it.
async fn agent_tool_call<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &Frame,
    step: &str,
    name: &str,
    arguments: Value,
    record: &mut StepTrail,
) -> Result<Value, RunError> {
    shared.emit(RunEvent::ToolCall {
        run_id: frame.run_id.clone(),
        step: step.to_string(),
        tool: name.to_string(),
        arguments: arguments.clone(),
    });
    let target = name.split_once(TOOL_SEPARATOR).and_then(|(alias, tool)| {
        let found = match (frame.ir.tools.get(alias), frame.ir.skills.get(alias)) {
            (Some(pin), _) => Some((pin.clone(), ComponentKind::ToolServer)),
            (None, Some(pin)) => Some((pin.clone(), ComponentKind::Skill)),
            _ => None,
        };
        found.map(|(pin, kind)| (pin, kind, tool.to_string()))
    });
    let Some((pin, kind, tool)) = target else {
        let output = Value::String(format!("error: no tool named '{name}' is offered"));
        emit_result(shared, frame, step, name, &output, true);
        return Ok(output);
    };
    let call = ToolCall {
        parent_request_id: shared.request_id.clone(),
        pin: pin.clone(),
        kind,
        tool,
        arguments: arguments.clone(),
        budget: frame.meter.clone(),
    };
    let answer = shared.bounded(step, shared.host.call_tool(call)).await?;
    emit_result(shared, frame, step, name, &answer.output, answer.is_error);
    record.tool_calls.push(ToolCallTrail {
        request_id: answer.request_id,
        tool: name.to_string(),
        component: pin.package,
        input_digest: digest(&arguments),
        output_digest: digest(&answer.output),
        is_error: answer.is_error,
    });
    Ok(answer.output)
}
