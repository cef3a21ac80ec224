//! What every frame of one run shares: its host, its limits and counters,
//! and the helpers that keep tenant work bounded. Templates are tried in
//! place with a small slice of fuel, then on a render thread (see
//! `limits.rs`); schema checks run on the blocking pool; both inside the
//! run's wall time. Sub-runs, bytes rendered and the trail's size are
//! counted against the operator's caps as the run goes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use serde_json::Value;
use tollgate_core::money::Nanos;

use super::exec::Frame;
use super::limits::{Engine, RunLimits};
use super::schema::check_schema;
use super::templates::{Problem, Renderer, Scope};
use super::{Events, Failure, Meter, RunError, RunEvent};

pub(super) struct Shared<H> {
    pub(super) host: Arc<H>,
    pub(super) events: Option<Events>,
    pub(super) request_id: String,
    pub(super) max_steps: u32,
    pub(super) max_depth: u32,
    pub(super) deadline: tokio::time::Instant,
    pub(super) steps_taken: AtomicU32,
    /// Subtasks and map items started, nested ones included.
    pub(super) sub_runs: AtomicU32,
    pub(super) rendered_bytes: AtomicU64,
    /// The trail's JSON size so far, as steps and runs finish.
    pub(super) trail_bytes: AtomicU64,
    pub(super) root: Meter,
    pub(super) cap: Option<i64>,
    pub(super) engine: Arc<Engine>,
}

impl<H> Shared<H> {
    pub(super) fn limits(&self) -> &RunLimits {
        self.engine.limits()
    }

    /// Evaluates templates of `step`: first in place with a small slice of
    /// fuel, then, if that is not enough, on the render pool with the full
    /// limits, inside the run's wall time. What they produced counts
    /// against the run's cap.
    pub(super) async fn render<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static>(
        &self,
        step: &str,
        frame: &Frame,
        scope: Option<Scope>,
        work: impl Fn(&mut Renderer) -> Result<T, Problem> + Send + Sync + 'static,
    ) -> Result<T, RunError> {
        let quick = {
            let mut renderer = Renderer::quick(&self.engine, &frame.ir, scope.as_ref().unwrap_or(&frame.scope));
            let result = work(&mut renderer);
            (result, renderer.bytes)
        };
        let (result, bytes) = match quick {
            (Err(Problem::Limit(_)), _) => {
                let ir = frame.ir.clone();
                let scope = scope.unwrap_or_else(|| frame.scope.clone());
                let job = self.engine.render_isolated(self.deadline, move |engine| {
                    let mut renderer = Renderer::new(engine, &ir, &scope);
                    let result = work(&mut renderer);
                    (result, renderer.bytes)
                });
                job.await.ok_or_else(|| self.timed_out(step))?
            }
            done => done,
        };
        let rendered = self.rendered_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let value = result.map_err(|problem| match problem {
            Problem::Invalid(message) => template_error(self, step, message),
            Problem::Limit(message) => self.error(
                "template_limit",
                format!("The run stopped at step '{step}': {message}."),
                step,
            ),
        })?;
        if rendered > self.limits().max_rendered_bytes {
            return Err(self.error(
                "run_limit",
                format!(
                    "The run stopped at step '{step}': its templates have produced {rendered} bytes, more than the {} a run may.",
                    self.limits().max_rendered_bytes
                ),
                step,
            ));
        }
        Ok(value)
    }

    /// Checks `instance` against `schema` on the render pool: a tenant's
    /// schema (its patterns included) is tenant computation too.
    /// The outer error is the run's wall time running out meanwhile (a
    /// `timeout` at `step`, or of the run itself); the inner one, the
    /// problems found.
    pub(super) async fn check(
        &self,
        step: Option<&str>,
        schema: &Value,
        instance: &Value,
    ) -> Result<Result<(), String>, RunError> {
        let (schema, instance) = (schema.clone(), instance.clone());
        let job = self.engine.pooled(move || check_schema(&schema, &instance));
        tokio::time::timeout_at(self.deadline, job)
            .await
            .map_err(|_| match step {
                Some(step) => self.timed_out(step),
                None => RunError {
                    code: "timeout".into(),
                    message: "The run ran past its wall-time limit while its input or output was checked.".into(),
                    step: None,
                },
            })
    }

    /// Counts `count` more sub-runs, or refuses past the run's cap.
    pub(super) fn claim_sub_runs(&self, step: &str, count: usize) -> Result<(), RunError> {
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        let started = self.sub_runs.fetch_add(count, Ordering::Relaxed).saturating_add(count);
        if started > self.limits().max_sub_runs {
            return Err(self.error(
                "run_limit",
                format!(
                    "The run stopped at step '{step}': it would start {started} sub-actor runs (subtasks and map items, nested ones included), more than the {} a run may.",
                    self.limits().max_sub_runs
                ),
                step,
            ));
        }
        Ok(())
    }

    pub(super) fn emit(&self, event: RunEvent) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }

    /// An error stating what the run has spent, and of what budget.
    pub(super) fn error(&self, code: &str, message: String, step: &str) -> RunError {
        let spent = Nanos(self.root.spent()).usd_string();
        let of = match self.cap {
            Some(cap) => format!(" of its {} USD budget", Nanos(cap).usd_string()),
            None => String::new(),
        };
        RunError {
            code: code.to_string(),
            message: format!("{message} The run has spent {spent} USD{of}."),
            step: Some(step.to_string()),
        }
    }

    pub(super) async fn bounded<T>(
        &self,
        step: &str,
        call: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, RunError> {
        match tokio::time::timeout_at(self.deadline, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(failure)) => Err(self.failed(step, failure)),
            Err(_) => Err(self.timed_out(step)),
        }
    }

    pub(super) fn timed_out(&self, step: &str) -> RunError {
        self.error(
            "timeout",
            format!("The run stopped at step '{step}': it ran past its wall-time limit."),
            step,
        )
    }

    pub(super) fn failed(&self, step: &str, failure: Failure) -> RunError {
        let code = match failure.code.as_str() {
            "budget_exceeded" => "budget_exceeded",
            "tool_error" => "tool_error",
            "actor_unavailable" => "actor_unavailable",
            _ => "model_error",
        };
        let detail = match code {
            "model_error" => format!("{} ({})", failure.message, failure.code),
            _ => failure.message,
        };
        self.error(code, format!("The run stopped at step '{step}': {detail}."), step)
    }
}

pub(super) fn template_error<H>(shared: &Shared<H>, step: &str, problem: impl std::fmt::Display) -> RunError {
    shared.error(
        "template_error",
        format!("The run stopped at step '{step}': {problem}."),
        step,
    )
}
