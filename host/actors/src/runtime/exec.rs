//! The interpreter: runs an actor's steps in order, each sub-actor (a
//! subtask, or a map item) as a run of its own with a fresh scope, and
//! records every step in the trail as it finishes.
//!
//! Limits are enforced here, cooperatively, so a run that stops keeps the
//! trail of what it did: the step count before each step, the depth before
//! each sub-run, the wall-clock deadline around every host call, and the
//! cost budget by the host holding each call's worst case (see `meter`).
//! The operator's caps ([`super::RunLimits`]) bound what the run makes the
//! gateway do: steps, sub-runs, bytes rendered and the trail's size (see
//! `shared.rs`, where templates and schema checks are sent off the runtime's
//! workers).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tollgate_core::money::Nanos;

use super::limits::Engine;
pub(crate) use super::schema::check_schema;
use super::shared::Shared;
use super::templates::{self, Scope};
use super::{ComponentKind, DeltaSink, Events, Host, Meter, ModelAnswer, ModelCall, RunError, RunEvent};
use super::{RunOutcome, ToolCall};
use crate::ActorId;
use crate::ir::{
    Action, AgentStep, Ir, LlmStep, MapStep, ResponseFormat, Shape, Step, SubtaskStep, Template, ToolStep,
};
use crate::provenance::{ModelCallTrail, RunTrail, StepTrail, ToolCallTrail, TrailError, digest};

/// Separates a tool alias from the tool's name in what an agent's model sees.
pub const TOOL_SEPARATOR: &str = "__";

/// A run to start.
pub struct RunSpec {
    pub ir: Arc<Ir>,
    pub actor_id: ActorId,
    pub input: Value,
    pub run_id: String,
    /// The run's own request id: its model and tool calls are logged under it.
    pub request_id: String,
    /// The caller's own cap on cost, on top of the actor's.
    pub max_cost_nanos: Option<i64>,
    pub events: Option<Events>,
    /// The gateway's limits and render pool.
    pub engine: Arc<Engine>,
}

/// Runs an actor to its end: an output, or the error that stopped it. The
/// returned trail covers every step that ran either way.
pub async fn run<H: Host>(host: Arc<H>, spec: RunSpec) -> RunOutcome {
    let budget = &spec.ir.budget;
    let cap = match (budget.max_cost_nanos, spec.max_cost_nanos) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let root = Meter::root(cap);
    let limits = spec.engine.limits();
    let shared = Arc::new(Shared {
        host,
        events: spec.events,
        request_id: spec.request_id,
        max_steps: budget.max_steps.min(limits.max_steps),
        max_depth: budget.max_depth,
        deadline: tokio::time::Instant::now() + std::time::Duration::from_millis(budget.max_wall_ms),
        steps_taken: AtomicU32::new(0),
        sub_runs: AtomicU32::new(0),
        rendered_bytes: AtomicU64::new(0),
        trail_bytes: AtomicU64::new(0),
        root: root.clone(),
        cap,
        engine: spec.engine,
    });
    let (result, trail) = run_actor(
        shared,
        spec.ir,
        spec.actor_id,
        spec.run_id,
        None,
        0,
        root.clone(),
        spec.input,
    )
    .await;
    RunOutcome {
        result,
        cost_nanos: root.spent(),
        trail,
    }
}

/// One actor's run: its scope and the trail of its steps.
pub(super) struct Frame {
    pub(super) ir: Arc<Ir>,
    run_id: String,
    depth: u32,
    meter: Meter,
    pub(super) scope: Scope,
    steps: Vec<StepTrail>,
    last_output: Value,
}

enum Flow {
    Next,
    Return(Value),
}

#[allow(clippy::too_many_arguments)]
fn run_actor<H: Host>(
    shared: Arc<Shared<H>>,
    ir: Arc<Ir>,
    actor_id: ActorId,
    run_id: String,
    parent_run_id: Option<String>,
    depth: u32,
    meter: Meter,
    input: Value,
) -> BoxFuture<'static, (Result<Value, RunError>, RunTrail)> {
    Box::pin(async move {
        let started_at_ms = now_ms();
        let started = Instant::now();
        let input_digest = digest(&input);
        let mut frame = Frame {
            ir: ir.clone(),
            run_id: run_id.clone(),
            depth,
            meter: meter.clone(),
            scope: Scope::new(input.clone()),
            steps: Vec::new(),
            last_output: Value::Null,
        };
        let result = match shared.check(None, &ir.inputs, &input).await {
            Err(timed_out) => Err(timed_out),
            Ok(Err(problem)) => Err(RunError {
                code: "invalid_input".into(),
                message: format!("The input does not match the actor's input schema: {problem}."),
                step: None,
            }),
            Ok(Ok(())) => match exec_block(&shared, &mut frame, &ir.steps).await {
                Ok(Flow::Return(value)) => Ok(value),
                Ok(Flow::Next) => Ok(std::mem::take(&mut frame.last_output)),
                Err(error) => Err(error),
            },
        };
        let result = match (result, &ir.outputs) {
            (Ok(output), Some(schema)) => match shared.check(None, schema, &output).await {
                Ok(Ok(())) => Ok(output),
                Err(timed_out) => Err(timed_out),
                Ok(Err(problem)) => Err(RunError {
                    code: "invalid_output".into(),
                    message: format!("The actor's output does not match its output schema: {problem}."),
                    step: None,
                }),
            },
            (result, _) => result,
        };
        let trail = RunTrail {
            run_id,
            actor_id: actor_id.to_string(),
            actor: format!("{}/{}", ir.metadata.namespace, ir.metadata.name),
            parent_run_id,
            depth,
            status: if result.is_ok() { "succeeded" } else { "failed" }.into(),
            error: result.as_ref().err().map(|e| TrailError {
                code: e.code.clone(),
                message: e.message.clone(),
            }),
            input_digest,
            output_digest: result.as_ref().ok().map(digest),
            cost_usd: Nanos(meter.spent()).usd_string(),
            started_at_ms,
            duration_ms: elapsed_ms(started),
            steps: frame.steps,
        };
        // The run's own fields; its steps were counted as they finished.
        shared.trail_bytes.fetch_add(RUN_TRAIL_BYTES, Ordering::Relaxed);
        (result, trail)
    })
}

fn exec_block<'a, H: Host>(
    shared: &'a Arc<Shared<H>>,
    frame: &'a mut Frame,
    steps: &'a [Step],
) -> BoxFuture<'a, Result<Flow, RunError>> {
    Box::pin(async move {
        for step in steps {
            if let Flow::Return(value) = exec_step(shared, frame, step).await? {
                return Ok(Flow::Return(value));
            }
        }
        Ok(Flow::Next)
    })
}

fn kind_of(action: &Action) -> &'static str {
    match action {
        Action::Llm(_) => "llm",
        Action::Agent(_) => "agent",
        Action::Tool(_) => "tool",
        Action::Subtask(_) => "subtask",
        Action::Map(_) => "map",
        Action::If(_) => "if",
        Action::Return(_) => "return",
    }
}

async fn exec_step<H: Host>(shared: &Arc<Shared<H>>, frame: &mut Frame, step: &Step) -> Result<Flow, RunError> {
    let kind = kind_of(&step.action);
    let taken = shared.steps_taken.fetch_add(1, Ordering::Relaxed) + 1;
    if taken > shared.max_steps {
        return Err(shared.error(
            "step_limit",
            format!(
                "The run stopped before step '{}': it would be step {taken}, past the limit of {}.",
                step.id, shared.max_steps
            ),
            &step.id,
        ));
    }
    let trail_bytes = shared.trail_bytes.load(Ordering::Relaxed);
    if trail_bytes > shared.limits().max_trail_bytes {
        return Err(shared.error(
            "run_limit",
            format!(
                "The run stopped before step '{}': its provenance trail has reached {trail_bytes} bytes, more than the {} a run may keep.",
                step.id,
                shared.limits().max_trail_bytes
            ),
            &step.id,
        ));
    }
    shared.emit(RunEvent::StepStarted {
        run_id: frame.run_id.clone(),
        step: step.id.clone(),
        kind,
    });
    let started = Instant::now();
    let spent_before = frame.meter.spent();
    let mut record = StepTrail {
        id: step.id.clone(),
        kind: kind.into(),
        started_at_ms: now_ms(),
        ..StepTrail::default()
    };
    let outcome = match &step.action {
        Action::If(branch) => {
            // The `if` is recorded before its branch, whose steps follow it.
            let condition = branch.condition.clone();
            let taken = shared
                .render(&step.id, frame, None, move |r| r.value(&condition))
                .await
                .map(|condition| templates::truthy(&condition));
            record.status = if taken.is_ok() { "succeeded" } else { "failed" }.into();
            record.error = taken.as_ref().err().map(|e| e.message.clone());
            record.output_digest = taken.as_ref().ok().map(|&t| digest(&json!(t)));
            record.cost_usd = Nanos::ZERO.usd_string();
            record.duration_ms = elapsed_ms(started);
            finish(shared, frame, record, kind);
            let branch_steps = if taken? { &branch.then } else { &branch.otherwise };
            return exec_block(shared, frame, branch_steps).await;
        }
        Action::Return(shape) => {
            let shape = shape.clone();
            shared
                .render(&step.id, frame, None, move |r| r.shape(&shape))
                .await
                .map(|value| (value, true))
        }
        Action::Llm(llm) => llm_step(shared, frame, &step.id, llm, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Agent(agent) => agent_step(shared, frame, &step.id, agent, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Tool(tool) => tool_step(shared, frame, &step.id, tool, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Subtask(subtask) => subtask_step(shared, frame, &step.id, subtask, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Map(map) => map_step(shared, frame, &step.id, map, &mut record)
            .await
            .map(|v| (v, false)),
    };
    record.cost_usd = Nanos(frame.meter.spent() - spent_before).usd_string();
    record.duration_ms = elapsed_ms(started);
    match outcome {
        Ok((output, returns)) => {
            record.status = "succeeded".into();
            record.output_digest = Some(digest(&output));
            finish(shared, frame, record, kind);
            if returns {
                return Ok(Flow::Return(output));
            }
            frame.scope.record(&step.id, output.clone());
            frame.last_output = output;
            Ok(Flow::Next)
        }
        Err(error) => {
            record.status = "failed".into();
            record.error = Some(error.message.clone());
            finish(shared, frame, record, kind);
            Err(error)
        }
    }
}

/// A run's trail without its steps, in bytes of JSON (ids, digests, timings).
const RUN_TRAIL_BYTES: u64 = 512;

/// The JSON size of a step's record, its child runs left out (their steps
/// were counted as they finished).
fn record_bytes(record: &mut StepTrail) -> u64 {
    let children = std::mem::take(&mut record.child_runs);
    let bytes = serde_json::to_vec(&*record).map_or(0, |json| json.len() as u64);
    record.child_runs = children;
    bytes
}

fn finish<H>(shared: &Shared<H>, frame: &mut Frame, mut record: StepTrail, kind: &'static str) {
    shared
        .trail_bytes
        .fetch_add(record_bytes(&mut record), Ordering::Relaxed);
    shared.emit(RunEvent::StepFinished {
        run_id: frame.run_id.clone(),
        step: record.id.clone(),
        kind,
        status: if record.status == "succeeded" {
            "succeeded"
        } else {
            "failed"
        },
        cost_usd: record.cost_usd.clone(),
        duration_ms: record.duration_ms,
    });
    frame.steps.push(record);
}

/// The opening messages of an `llm` or `agent` step.
async fn opening_messages<H: Host>(
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
struct Ask {
    messages: Vec<Value>,
    tools: Vec<Value>,
    response_format: Option<Value>,
}

async fn model_call<H: Host>(
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

fn content_text(message: &Value) -> String {
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

async fn llm_step<H: Host>(
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

async fn agent_step<H: Host>(
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

fn emit_result<H>(shared: &Shared<H>, frame: &Frame, step: &str, tool: &str, output: &Value, is_error: bool) {
    shared.emit(RunEvent::ToolResult {
        run_id: frame.run_id.clone(),
        step: step.to_string(),
        tool: tool.to_string(),
        output: output.clone(),
        is_error,
    });
}

async fn tool_step<H: Host>(
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

async fn render_shape<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &Frame,
    step: &str,
    scope: Option<Scope>,
    shape: &Shape,
) -> Result<Value, RunError> {
    let shape = shape.clone();
    shared.render(step, frame, scope, move |r| r.shape(&shape)).await
}

/// A sub-run's budget slice: the step's, capped by the sub-actor's own.
fn slice(step_cap: Option<i64>, actor_cap: Option<i64>) -> Option<i64> {
    match (step_cap, actor_cap) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

async fn load_child<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &Frame,
    step: &str,
    alias: &str,
) -> Result<(ActorId, Arc<Ir>), RunError> {
    if frame.depth + 1 > shared.max_depth {
        return Err(shared.error(
            "depth_limit",
            format!(
                "The run stopped at step '{step}': a sub-actor there would run at depth {}, past the limit of {}.",
                frame.depth + 1,
                shared.max_depth
            ),
            step,
        ));
    }
    let Some(id) = frame.ir.actors.get(alias).cloned() else {
        return Err(shared.error(
            "actor_unavailable",
            format!("The actor has no sub-actor '{alias}'."),
            step,
        ));
    };
    let ir = shared.bounded(step, shared.host.load_actor(&id)).await?;
    Ok((id, ir))
}

fn child_run_id() -> String {
    format!("run_{}", uuid::Uuid::now_v7().simple())
}

async fn subtask_step<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &mut Frame,
    step: &str,
    subtask: &SubtaskStep,
    record: &mut StepTrail,
) -> Result<Value, RunError> {
    let input = render_shape(shared, frame, step, None, &subtask.input).await?;
    record.input_digest = Some(digest(&input));
    let (id, ir) = load_child(shared, frame, step, &subtask.actor).await?;
    shared.claim_sub_runs(step, 1)?;
    let meter = frame
        .meter
        .child(slice(subtask.max_cost_nanos, ir.budget.max_cost_nanos));
    let run = run_actor(
        shared.clone(),
        ir,
        id,
        child_run_id(),
        Some(frame.run_id.clone()),
        frame.depth + 1,
        meter,
        input,
    );
    let (result, trail) = match tokio::time::timeout_at(shared.deadline, run).await {
        Ok(finished) => finished,
        Err(_) => return Err(shared.timed_out(step)),
    };
    record.child_runs.push(trail);
    result.map_err(|error| nested(step, error))
}

async fn map_step<H: Host>(
    shared: &Arc<Shared<H>>,
    frame: &mut Frame,
    step: &str,
    map: &MapStep,
    record: &mut StepTrail,
) -> Result<Value, RunError> {
    let items = map.items.clone();
    let items = shared.render(step, frame, None, move |r| r.value(&items)).await?;
    let Value::Array(items) = items else {
        return Err(shared.error(
            "template_error",
            format!("The run stopped at step '{step}': its items are not a list."),
            step,
        ));
    };
    if items.len() > map.max_items as usize {
        return Err(shared.error(
            "map_too_large",
            format!(
                "The run stopped at step '{step}': it was given {} items, more than its max_items of {}.",
                items.len(),
                map.max_items
            ),
            step,
        ));
    }
    record.input_digest = Some(digest(&Value::Array(items.clone())));
    let (id, ir) = load_child(shared, frame, step, &map.actor).await?;
    shared.claim_sub_runs(step, items.len())?;
    let cap = slice(map.max_cost_nanos, ir.budget.max_cost_nanos);
    let mut runs = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let mut scope = frame.scope.clone();
        scope.item = Some((item, index));
        let input = render_shape(shared, frame, step, Some(scope), &map.input).await?;
        runs.push(run_actor(
            shared.clone(),
            ir.clone(),
            id.clone(),
            child_run_id(),
            Some(frame.run_id.clone()),
            frame.depth + 1,
            frame.meter.child(cap),
            input,
        ));
    }
    let concurrency = map.concurrency.max(1) as usize;
    let finished = futures_util::stream::iter(runs)
        .buffered(concurrency)
        .collect::<Vec<_>>();
    let finished = match tokio::time::timeout_at(shared.deadline, finished).await {
        Ok(finished) => finished,
        Err(_) => return Err(shared.timed_out(step)),
    };
    let mut outputs = Vec::with_capacity(finished.len());
    let mut first_error = None;
    for (index, (result, trail)) in finished.into_iter().enumerate() {
        record.child_runs.push(trail);
        match result {
            Ok(output) => outputs.push(output),
            Err(error) => {
                first_error.get_or_insert_with(|| nested(&format!("{step}[{index}]"), error));
            }
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(Value::Array(outputs)),
    }
}

/// A sub-run's error as its parent step reports it: same code and message,
/// the step path prefixed.
fn nested(step: &str, mut error: RunError) -> RunError {
    error.step = Some(match error.step {
        Some(inner) => format!("{step}/{inner}"),
        None => step.to_string(),
    });
    error
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
