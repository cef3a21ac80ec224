//! `[actors]`, owned here and read by the binary's configuration.

use serde::{Deserialize, Serialize};

/// `[actors]`: hosted actors, and the limits of every run and compile
/// (docs/actors.md, "Limits").
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActorsConfig {
    /// Deployments one workspace may have (the plan's hosted actor
    /// endpoints); absent: no limit. `deployments.create` past it is refused
    /// with `plan_limit`.
    pub max_deployments_per_workspace: Option<u32>,
    /// minijinja fuel of one template evaluation (instructions, and one unit
    /// per 64 bytes of data).
    pub template_fuel: u64,
    /// Bytes one step's templates may produce together.
    pub max_template_bytes: u64,
    /// Bytes all of a run's templates may produce together.
    pub max_rendered_bytes: u64,
    /// Ceiling on an actor's `budget.max_steps`.
    pub max_steps: u32,
    /// Sub-actor runs (subtasks and map items, nested included) per run.
    pub max_sub_runs: u32,
    /// A run's provenance trail, in bytes of JSON.
    pub max_trail_bytes: u64,
    /// Trails up to this size stay in the run's request-log row; larger ones
    /// go to the blob store, the row keeping their digest.
    pub inline_trail_bytes: u64,
    /// Templates rendering at once, gateway-wide; 0: one fewer than the CPUs.
    pub render_threads: usize,
    /// Memory one render on the pool may allocate (it runs in a child
    /// process capped at this); past it the run fails with `template_limit`.
    pub render_memory_bytes: u64,
    /// Compiles (`actors.compile`, `actors.publish`) running at once, gateway-wide.
    pub max_compiles: usize,
    /// Compiles running at once for one workspace.
    pub max_compiles_per_workspace: usize,
}

impl Default for ActorsConfig {
    fn default() -> Self {
        let run = tollgate_actors::runtime::RunLimits::default();
        Self {
            max_deployments_per_workspace: None,
            template_fuel: run.template_fuel,
            max_template_bytes: run.max_template_bytes,
            max_rendered_bytes: run.max_rendered_bytes,
            max_steps: run.max_steps,
            max_sub_runs: run.max_sub_runs,
            max_trail_bytes: run.max_trail_bytes,
            inline_trail_bytes: 16 << 10,
            render_threads: 0,
            render_memory_bytes: run.render_memory_bytes,
            max_compiles: 4,
            max_compiles_per_workspace: 2,
        }
    }
}

impl ActorsConfig {
    /// The gateway's template engine: these limits, and `render_threads`
    /// renders at once (0: one fewer than the CPUs). Built once at wiring
    /// and shared by actor runs and MCP prompt templates.
    pub fn engine(&self) -> tollgate_actors::runtime::Engine {
        let threads = match self.render_threads {
            0 => tollgate_actors::runtime::Engine::default_threads(),
            threads => threads,
        };
        tollgate_actors::runtime::Engine::new(self.run_limits(), threads)
    }

    pub fn run_limits(&self) -> tollgate_actors::runtime::RunLimits {
        tollgate_actors::runtime::RunLimits {
            template_fuel: self.template_fuel,
            max_template_bytes: self.max_template_bytes,
            max_rendered_bytes: self.max_rendered_bytes,
            max_steps: self.max_steps,
            max_sub_runs: self.max_sub_runs,
            max_trail_bytes: self.max_trail_bytes,
            render_memory_bytes: self.render_memory_bytes,
        }
    }
}
