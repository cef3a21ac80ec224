//! Sub-runs: the `subtask` and `map` steps, each child a run of its own with
//! a fresh scope, a slice of the parent's budget and one more level of
//! depth. Kept apart from the other steps because only these recurse into
//! `run_actor`, and only these count against the operator's sub-run cap.

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::Value;

use super::{Frame, render_shape, run_actor};
use crate::ActorId;
use crate::ir::{Ir, MapStep, SubtaskStep};
use crate::provenance::{StepTrail, digest};
use crate::runtime::shared::Shared;
use crate::runtime::{Host, RunError};

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

pub(super) async fn subtask_step<H: Host>(
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

pub(super) async fn map_step<H: Host>(
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
