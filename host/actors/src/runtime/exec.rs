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
//!
//! Each kind of step lives in a child module: model calls (`model`), the
//! agent loop (`agent`), tool calls (`tools`) and sub-runs (`sub_runs`).
//! This module keeps what every step shares: the frame, the step counter
//! and trail accounting, so a limit is checked in one place for all kinds.

mod agent;
mod model;
mod sub_runs;
mod tools;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tollgate_core::money::Nanos;

use super::limits::Engine;
pub(crate) use super::schema::check_schema;
use super::shared::Shared;
use super::templates::{self, Scope};
use super::{Events, Host, Meter, RunError, RunEvent, RunOutcome};
use crate::ActorId;
use crate::ir::{Action, Ir, Shape, Step};
use crate::provenance::{RunTrail, StepTrail, TrailError, digest};

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
        Action::Llm(llm) => model::llm_step(shared, frame, &step.id, llm, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Agent(agent) => agent::agent_step(shared, frame, &step.id, agent, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Tool(tool) => tools::tool_step(shared, frame, &step.id, tool, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Subtask(subtask) => sub_runs::subtask_step(shared, frame, &step.id, subtask, &mut record)
            .await
            .map(|v| (v, false)),
        Action::Map(map) => sub_runs::map_step(shared, frame, &step.id, map, &mut record)
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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
