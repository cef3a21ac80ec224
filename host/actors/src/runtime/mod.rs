//! Running an actor's IR. The runtime decides what to call and in what
//! order; the [`Host`] makes the calls: model calls through the gateway's
//! metered data plane, tool calls into sandboxed components, and sub-actor
//! IR by id. So the runtime holds no keys, no wallet and no sockets, and a
//! test can drive it with a fake host.
//!
//! Isolation is structural: a sub-actor starts from a fresh [`Scope`] that
//! holds only its explicit input, and builds its own messages; nothing of
//! the parent's conversation is reachable from it.

pub mod document;
mod exec;
mod isolate;
pub mod limits;
mod meter;
mod schema;
mod shared;
pub mod templates;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

pub use document::render_document;
pub use exec::{RunSpec, run};
pub use limits::{Engine, RunLimits};
pub use meter::{BudgetExceeded, Hold, Meter};
pub use templates::Scope;

use crate::ActorId;
use crate::ir::{ComponentPin, Ir};
use crate::provenance::RunTrail;

/// Whether `input` matches the actor's input schema, checked the way a run
/// checks it first, so a surface can refuse bad input before starting one.
pub fn check_input(ir: &Ir, input: &Value) -> Result<(), String> {
    exec::check_schema(&ir.inputs, input)
}

/// Why a call the host made failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// A stable code: the data plane's error code for model calls
    /// (`budget_exceeded` when the run's budget refused the call),
    /// `tool_error` for a tool that answered with an error.
    pub code: String,
    pub message: String,
}

impl Failure {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// Streamed text of a model call, as it arrives.
pub type DeltaSink = Arc<dyn Fn(&str) + Send + Sync>;

/// One chat completion the runtime asks for.
pub struct ModelCall {
    /// The run's request id: the model call's log row is linked to it.
    pub parent_request_id: String,
    pub candidates: Vec<String>,
    pub params: BTreeMap<String, Value>,
    /// OpenAI chat messages.
    pub messages: Vec<Value>,
    /// OpenAI function tools (empty: none).
    pub tools: Vec<Value>,
    pub response_format: Option<Value>,
    /// The budget the call's worst case must fit in: the host holds it
    /// before any upstream call and settles it to the billed cost.
    pub budget: Meter,
    /// Present when the caller streams: the host streams the call and feeds it.
    pub deltas: Option<DeltaSink>,
}

/// A model call's answer, as billed.
#[derive(Clone, Debug)]
pub struct ModelAnswer {
    /// The assistant message (`content`, and `tool_calls` when it called tools).
    pub message: Value,
    pub request_id: String,
    pub provider: String,
    pub model: String,
    pub attempts: Value,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_nanos: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComponentKind {
    ToolServer,
    Skill,
}

/// A tool as a model is offered it.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

pub struct ToolCall {
    pub parent_request_id: String,
    pub pin: ComponentPin,
    pub kind: ComponentKind,
    /// The tool's name in its server (`run` for a skill).
    pub tool: String,
    pub arguments: Value,
    /// A skill's model calls spend from the run's budget too.
    pub budget: Meter,
}

#[derive(Clone, Debug)]
pub struct ToolAnswer {
    pub request_id: String,
    /// The structured result, or the text content as a string.
    pub output: Value,
    /// The tool answered with an error (the output says what).
    pub is_error: bool,
}

/// What the runtime needs from the gateway.
pub trait Host: Send + Sync + 'static {
    fn chat(&self, call: ModelCall) -> BoxFuture<'static, Result<ModelAnswer, Failure>>;
    /// The tools of a component (a skill offers one, `run`).
    fn tools(&self, pin: &ComponentPin, kind: ComponentKind) -> BoxFuture<'static, Result<Vec<ToolSpec>, Failure>>;
    fn call_tool(&self, call: ToolCall) -> BoxFuture<'static, Result<ToolAnswer, Failure>>;
    /// A published actor's IR.
    fn load_actor(&self, id: &ActorId) -> BoxFuture<'static, Result<Arc<Ir>, Failure>>;
}

/// What a streaming caller sees as the run goes.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    StepStarted {
        run_id: String,
        step: String,
        kind: &'static str,
    },
    StepFinished {
        run_id: String,
        step: String,
        kind: &'static str,
        status: &'static str,
        cost_usd: String,
        duration_ms: u64,
    },
    Delta {
        run_id: String,
        step: String,
        text: String,
    },
    ToolCall {
        run_id: String,
        step: String,
        tool: String,
        arguments: Value,
    },
    ToolResult {
        run_id: String,
        step: String,
        tool: String,
        output: Value,
        is_error: bool,
    },
}

pub type Events = tokio::sync::mpsc::UnboundedSender<RunEvent>;

/// Why a run stopped without an output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunError {
    /// `budget_exceeded`, `step_limit`, `depth_limit`, `timeout`,
    /// `invalid_input`, `invalid_output`, `template_error`, `template_limit`,
    /// `run_limit`, `model_error`, `tool_error`, `actor_unavailable`,
    /// `max_iterations`.
    pub code: String,
    pub message: String,
    /// The step that failed, as `<run id>/<step id>` paths down to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// A finished run: its output or error, what it spent, and its trail.
#[derive(Debug)]
pub struct RunOutcome {
    pub result: Result<Value, RunError>,
    pub cost_nanos: i64,
    pub trail: RunTrail,
}
