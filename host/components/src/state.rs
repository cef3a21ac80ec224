//! One call's store: its data ([`CallState`]: limits, grants, the caller's
//! capabilities), and the sandbox around it. A fresh store per call, capped
//! memory, a guest-compute budget counted in the thread's CPU time (looked at
//! on each epoch tick), and a wall-time deadline that host calls cannot
//! stretch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use wasmtime::{ResourceLimiter, Store, Trap, UpdateDeadline};

use crate::bindings::{Content, ModelError, ToolError};
use crate::egress::Egress;
use crate::grants::Grants;
use crate::limits::ComponentLimits;

/// On whose behalf a component runs.
#[derive(Clone, Debug)]
pub struct Invocation {
    /// The gateway request the call belongs to.
    pub request_id: String,
    pub workspace: String,
    pub install: String,
    /// 0 for a call from outside; each nested tool call adds one.
    pub depth: u32,
    /// Where the component's log lines also go, as they are written (an
    /// MCP client's log notifications); `None`: to the trace only.
    pub logs: Option<LogSink>,
    /// Where the component's progress reports go (an MCP client that sent a
    /// `progressToken`); `None`: they are dropped.
    pub progress: Option<ProgressSink>,
    /// Who answers the component's questions (tool WIT 0.3.0's
    /// `elicitation`: the MCP client whose request the call serves);
    /// `None`: no one, and asking fails as `unavailable`.
    pub elicit: Option<Arc<dyn Elicitor>>,
}

/// Asks the user of the MCP client a call serves, and waits for the answer
/// (MCP's `elicitation/create`). The MCP endpoint implements it per call,
/// bound to the client's session and SSE answer; it bounds its own wait and
/// answers `timed-out` past it.
pub trait Elicitor: Send + Sync + std::fmt::Debug {
    fn elicit(&self, message: String, requested_schema: serde_json::Value) -> BoxFuture<'static, ElicitOutcome>;
}

/// What asking came to: the user's answer, or why there is none.
pub type ElicitOutcome = Result<crate::bindings::Elicited, crate::bindings::ElicitError>;

/// Receives a call's progress reports while it runs.
pub type ProgressSink = tokio::sync::mpsc::UnboundedSender<Progress>;

/// One progress report, after the host's checks: finite, greater than the
/// call's last, within the count cap.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Receives a call's log lines while it runs.
pub type LogSink = tokio::sync::mpsc::UnboundedSender<LogLine>;

/// One line a component logged, after the host's caps (length, count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// `debug`, `info`, `warning` or `error` (RFC 5424's names, as MCP's).
    pub level: &'static str,
    pub message: String,
}

/// Model calls on the caller's behalf, through the metered pipeline. The
/// server implements it per call, bound to the caller's key and wallet.
pub trait ModelAccess: Send + Sync {
    fn chat(&self, request: String) -> BoxFuture<'static, Result<String, ModelError>>;
}

/// Tool calls on the caller's behalf, to installs in the caller's workspace.
/// The server implements it per call, at the next depth.
pub trait ToolAccess: Send + Sync {
    fn call(&self, tool: String, arguments: String) -> BoxFuture<'static, Result<Vec<Content>, ToolError>>;
}

/// The capabilities the caller lends this call. A skill gets both; a tool
/// server on tool WIT 0.4.0 whose package declares `models` gets `models`,
/// any other tool server neither.
#[derive(Clone, Default)]
pub struct Capabilities {
    pub models: Option<Arc<dyn ModelAccess>>,
    pub tools: Option<Arc<dyn ToolAccess>>,
}

/// Why the sandbox stopped a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Compute,
    WallTime,
}

pub struct CallState {
    pub(crate) limits: Arc<ComponentLimits>,
    pub(crate) invocation: Invocation,
    pub(crate) grants: Arc<Grants>,
    pub(crate) capabilities: Capabilities,
    pub(crate) egress: Arc<Egress>,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) log_lines: u32,
    pub(crate) progress_reports: u32,
    /// Questions asked so far (`elicitation`).
    pub(crate) elicitations: u32,
    /// Model calls made so far (`models`).
    pub(crate) model_calls: u32,
    /// The last progress reported; a report must pass it.
    pub(crate) last_progress: Option<f64>,
    memory_cap: usize,
    memory_cap_hit: bool,
    deadline: Instant,
    /// Guest compute so far; descheduled and blocked time is not counted.
    clock: tollgate_plugin_host::GuestClock,
    stopped: Option<Stop>,
    /// Keeps the epoch ticker running while this store runs guest code;
    /// `None` while a store made ahead of need waits for its call.
    awake: Option<tollgate_plugin_host::Awake>,
}

impl CallState {
    pub(crate) fn new(
        limits: Arc<ComponentLimits>,
        memory_cap: usize,
        invocation: Invocation,
        grants: Arc<Grants>,
        capabilities: Capabilities,
        egress: Arc<Egress>,
        runtime: tokio::runtime::Handle,
        awake: Option<tollgate_plugin_host::Awake>,
    ) -> Self {
        let wall = Duration::from_millis(limits.wall_ms);
        Self {
            deadline: Instant::now() + wall,
            clock: tollgate_plugin_host::GuestClock::new(Duration::from_millis(limits.cpu_ms), wall),
            memory_cap: memory_cap.min(limits.memory_mib << 20),
            limits,
            invocation,
            grants,
            capabilities,
            egress,
            runtime,
            log_lines: 0,
            progress_reports: 0,
            elicitations: 0,
            model_calls: 0,
            last_progress: None,
            memory_cap_hit: false,
            stopped: None,
            awake,
        }
    }

    /// Gives a store made ahead of need (instantiated on the warmer thread,
    /// for no one, with nothing granted) to the call that takes it: on whose
    /// behalf it runs, what it may use, and a whole budget from now.
    pub(crate) fn bind(
        &mut self,
        invocation: Invocation,
        grants: Arc<Grants>,
        capabilities: Capabilities,
        runtime: tokio::runtime::Handle,
        awake: tollgate_plugin_host::Awake,
    ) {
        self.invocation = invocation;
        self.grants = grants;
        self.capabilities = capabilities;
        self.runtime = runtime;
        self.awake = Some(awake);
        self.log_lines = 0;
        self.progress_reports = 0;
        self.elicitations = 0;
        self.model_calls = 0;
        self.last_progress = None;
        self.deadline = Instant::now() + Duration::from_millis(self.limits.wall_ms);
        self.clock.restart();
    }

    /// Lets the ticker sleep while this store waits, ready, for a call.
    pub(crate) fn park(&mut self) {
        self.awake = None;
    }

    /// Wall time left for this call; host calls are bounded by it.
    pub(crate) fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Takes `waited` out of the call's wall time: time spent waiting for a
    /// person (an elicitation's answer) is not the component's, and has a
    /// bound of its own.
    pub(crate) fn exclude_wait(&mut self, waited: Duration) {
        self.deadline += waited;
        self.clock.exclude(waited);
    }

    /// Runs an async capability to completion on this call's blocking thread,
    /// within the call's remaining wall time.
    pub(crate) fn block_on<F: std::future::Future>(&self, limit: Duration, future: F) -> Option<F::Output> {
        let limit = limit.min(self.remaining());
        self.runtime
            .block_on(async { tokio::time::timeout(limit, future).await.ok() })
    }
}

impl ResourceLimiter for CallState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.memory_cap_hit = true;
            wasmtime::bail!("component memory cap exceeded");
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// A fresh store for one call, made on the thread that runs the call. The
/// epoch callback runs only while the guest runs (epochs are checked in guest
/// code); it charges the thread's CPU time since the last look, so time
/// blocked in host calls or descheduled is not the guest's. The wall
/// deadline is checked there too.
pub(crate) fn new_store(engine: &wasmtime::Engine, mut state: CallState) -> Store<CallState> {
    state.clock.restart();
    let mut store = Store::new(engine, state);
    store.limiter(|state| state);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut context| {
        let state = context.data_mut();
        if Instant::now() >= state.deadline {
            state.stopped = Some(Stop::WallTime);
            wasmtime::bail!("component wall-time limit exceeded");
        }
        match state.clock.charge() {
            Ok(()) => Ok(UpdateDeadline::Continue(1)),
            Err(tollgate_plugin_host::Overrun::Compute) => {
                state.stopped = Some(Stop::Compute);
                wasmtime::bail!("component compute limit exceeded")
            }
            Err(tollgate_plugin_host::Overrun::WallTime) => {
                state.stopped = Some(Stop::WallTime);
                wasmtime::bail!("component wall-time limit exceeded")
            }
        }
    });
    store
}

/// Why a call failed, for its caller: the limit hit, or the trap.
pub(crate) fn describe_fault(store: &Store<CallState>, error: &wasmtime::Error) -> String {
    let state = store.data();
    if state.memory_cap_hit {
        return format!("exceeded its memory limit ({} MiB)", state.memory_cap >> 20);
    }
    match state.stopped {
        Some(Stop::Compute) => return format!("exceeded its compute limit ({} ms per call)", state.limits.cpu_ms),
        Some(Stop::WallTime) => return format!("exceeded its time limit ({} ms per call)", state.limits.wall_ms),
        None => {}
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::UnreachableCodeReached) => "trapped (the component panicked or hit unreachable code)".into(),
        Some(trap) => format!("trapped: {trap}"),
        // Imports outside the world are linked to traps: a Rust panic, for
        // one, first asks WASI for the environment and stops there.
        None => format!("trapped: {}", error.root_cause()),
    }
}
