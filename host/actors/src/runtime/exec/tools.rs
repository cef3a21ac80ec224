//! The `tool` step: one call to a named tool server. Unlike a tool call an
//! agent makes, a tool that answers with an error stops the run, because no
//! model is there to read the error and try again.

use std::sync::Arc;

use serde_json::Value;

use super::{Frame, render_shape};
use crate::ir::ToolStep;
use crate::provenance::{StepTrail, ToolCallTrail, digest};
use crate::runtime::shared::Shared;
use crate::runtime::{ComponentKind, Host, RunError, RunEvent, ToolCall};

/// Separates a tool alias from the tool's name in what an agent's model sees.
pub const TOOL_SEPARATOR: &str = "__";

pub(super) fn emit_result<H>(
    shared: &Shared<H>,
    frame: &Frame,
    step: &str,
    tool: &str,
    output: &Value,
    is_error: bool,
) {
    shared.emit(RunEvent::ToolResult {
        run_id: frame.run_id.clone(),
        step: step.to_string(),
        tool: tool.to_string(),
        output: output.clone(),
        is_error,
    });
}

pub(super) async fn tool_step<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &mut Frame,
    step: &str,
    tool: &ToolStep,
    record: &mut StepTrail,
) -> Result<Value, RunError> {
    let arguments = render_shape(shared, frame, step, None, &tool.arguments).await?;
    record.input_digest = Some(digest(&arguments));
    let Some(pin) = frame.ir.tools.get(&tool.server).cloned() else {
        return Err(shared.error(
            "actor_unavailable",
            format!("The actor has no tool server '{}'.", tool.server),
            step,
        ));
    };
    let name = format!("{}{TOOL_SEPARATOR}{}", tool.server, tool.tool);
    shared.emit(RunEvent::ToolCall {
        run_id: frame.run_id.clone(),
        step: step.to_string(),
        tool: name.clone(),
        arguments: arguments.clone(),
    });
    let call = ToolCall {
        parent_request_id: shared.request_id.clone(),
        pin: pin.clone(),
        kind: ComponentKind::ToolServer,
        tool: tool.tool.clone(),
        arguments: arguments.clone(),
        budget: frame.meter.clone(),
    };
    let answer = shared.bounded(step, shared.host.call_tool(call)).await?;
    emit_result(shared, frame, step, &name, &answer.output, answer.is_error);
    record.tool_calls.push(ToolCallTrail {
        request_id: answer.request_id,
        tool: name.clone(),
        component: pin.package,
        input_digest: digest(&arguments),
        output_digest: digest(&answer.output),
        is_error: answer.is_error,
    });
    if answer.is_error {
        let detail = match &answer.output {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        return Err(shared.error(
            "tool_error",
            format!("The run stopped at step '{step}': the tool {name} answered with an error: {detail}."),
            step,
        ));
    }
    Ok(answer.output)
}
