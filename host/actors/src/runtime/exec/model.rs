//! Model calls: the `llm` step, and the one call path every model request
//! of a run takes (the `agent` loop too), so each call is streamed, bounded
//! by the run's wall time and recorded in the trail the same way.

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate_core::money::Nanos;

use super::Frame;
use crate::ir::{LlmStep, ResponseFormat, Template};
use crate::provenance::{ModelCallTrail, StepTrail, digest};
use crate::runtime::shared::Shared;
use crate::runtime::{DeltaSink, Host, ModelAnswer, ModelCall, RunError, RunEvent};

/// The opening messages of an `llm` or `agent` step.
pub(super) async fn opening_messages<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &Frame,
    step: &str,
    system: Option<&Template>,
    prompt: &Template,
) -> Result<Vec<Value>, RunError> {
    let (system, prompt) = (system.cloned(), prompt.clone());
    shared
        .render(step, frame, None, move |r| {
            let mut messages = Vec::with_capacity(2);
            if let Some(system) = &system {
                messages.push(json!({"role": "system", "content": r.text(system)?}));
            }
            messages.push(json!({"role": "user", "content": r.text(&prompt)?}));
            Ok(messages)
        })
        .await
}

/// What one model call sends, besides the profile.
pub(super) struct Ask {
    pub(super) messages: Vec<Value>,
    pub(super) tools: Vec<Value>,
    pub(super) response_format: Option<Value>,
}

pub(super) async fn model_call<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &Frame,
    step: &str,
    profile: &str,
    ask: Ask,
    record: &mut StepTrail,
) -> Result<ModelAnswer, RunError> {
    let Ask {
        messages,
        tools,
        response_format,
    } = ask;
    let Some(profile) = frame.ir.models.get(profile) else {
        return Err(shared.error(
            "actor_unavailable",
            format!("The actor has no model profile '{profile}'."),
            step,
        ));
    };
    let deltas: Option<DeltaSink> = shared.events.clone().map(|events| {
        let (run_id, step) = (frame.run_id.clone(), step.to_string());
        Arc::new(move |text: &str| {
            let _ = events.send(RunEvent::Delta {
                run_id: run_id.clone(),
                step: step.clone(),
                text: text.to_string(),
            });
        }) as DeltaSink
    });
    let input_digest = digest(&Value::Array(messages.clone()));
    let call = ModelCall {
        parent_request_id: shared.request_id.clone(),
        candidates: profile.candidates.clone(),
        params: profile.params.clone(),
        messages,
        tools,
        response_format,
        budget: frame.meter.clone(),
        deltas,
    };
    let answer = shared.bounded(step, shared.host.chat(call)).await?;
    record.model_calls.push(ModelCallTrail {
        request_id: answer.request_id.clone(),
        models_requested: profile.candidates.clone(),
        model_served: answer.model.clone(),
        provider: answer.provider.clone(),
        attempts: answer.attempts.clone(),
        input_tokens: answer.input_tokens,
        output_tokens: answer.output_tokens,
        cost_usd: Nanos(answer.cost_nanos).usd_string(),
        input_digest,
        output_digest: digest(&answer.message),
    });
    Ok(answer)
}

pub(super) fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

pub(super) async fn llm_step<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &mut Frame,
    step: &str,
    llm: &LlmStep,
    record: &mut StepTrail,
) -> Result<Value, RunError> {
    let messages = opening_messages(shared, frame, step, llm.system.as_ref(), &llm.prompt).await?;
    record.input_digest = Some(digest(&Value::Array(messages.clone())));
    let response_format = match &llm.response {
        ResponseFormat::Text => None,
        ResponseFormat::Json { schema: Some(schema) } => Some(json!({
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema, "strict": true},
        })),
        ResponseFormat::Json { schema: None } => Some(json!({"type": "json_object"})),
    };
    let answer = model_call(
        shared,
        frame,
        step,
        &llm.model,
        Ask {
            messages,
            tools: Vec::new(),
            response_format,
        },
        record,
    )
    .await?;
    let text = content_text(&answer.message);
    match &llm.response {
        ResponseFormat::Text => Ok(Value::String(text)),
        ResponseFormat::Json { schema } => {
            let value: Value = serde_json::from_str(&text).map_err(|e| {
                shared.error(
                    "invalid_model_output",
                    format!("The run stopped at step '{step}': the model's answer is not JSON ({e})."),
                    step,
                )
            })?;
            if let Some(schema) = schema {
                shared.check(Some(step), schema, &value).await?.map_err(|problem| {
                    shared.error(
                        "invalid_model_output",
                        format!(
                            "The run stopped at step '{step}': the model's answer does not match the schema: {problem}."
                        ),
                        step,
                    )
                })?;
            }
            Ok(value)
        }
    }
}
