//! The component host for tool servers, skills and guardrails: components from the
//! registry, loaded once into the plugin engine, and called in a fresh,
//! capped store per call.
//!
//! Each host capability is one module that owns its rules and limits, as
//! Spin's host components do:
//! - `http`: approved origins, no redirects, capped bodies and time, credentials placed by the host;
//!   no internal addresses unless the operator allows them ([`Egress`]);
//! - `config`: the install's settings;
//! - `log`: lines into the request's trace, capped;
//! - `progress`: a 0.2.0 tool server's progress reports, to the MCP client that asked, capped;
//! - `elicitation`: a 0.3.0 tool server's questions to the MCP client's user ([`Elicitor`]),
//!   checked, counted, and waited for outside the call's wall time, up to their own timeout;
//! - `models`: chat completions through the server's metered pipeline ([`ModelAccess`]),
//!   at most `max_model_calls` per call;
//! - `tools`: tools of other installs in the caller's workspace ([`ToolAccess`]), depth-limited.
//!
//! A tool server imports `http`, `config` and `log` (and `progress` from
//! 0.2.0, `elicitation` from 0.3.0, `models` at 0.4.0; [`ToolServer`] detects its world when
//! loading, and lends `models` only to a 0.4.0 call); a skill imports
//! `models`, `tools`, `config` and `log`, and has no network. A component
//! that traps, loops, eats memory or answers too much fails only its own call.
#![forbid(unsafe_code)]

mod bindings;
mod config;
mod content;
mod egress;
mod elicitation;
mod grants;
mod guardrail;
mod http;
mod limits;
mod log;
mod models;
mod progress;
mod random;
mod skill;
mod state;
mod tool_server;
mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use bindings::skill::exports::tollgate::skill::runner::SkillError;
pub use bindings::{
    CallContext, Content, ElicitAction, ElicitError, Elicited, Media, ModelError, Prompt, PromptArgument,
    PromptMessage, PromptMessages, Reference, Resource, ResourceBody, ResourceContents, ResourceTemplate, Role,
    ToolError,
};
pub use content::{mcp_content, mcp_resource};
pub use egress::{Egress, is_internal};
pub use elicitation::MAX_PER_CALL as MAX_ELICITATIONS;
pub use grants::{Credential, Grants, Origin, Placement};
pub use guardrail::{
    Check, Guardrail, GuardrailSpec, RequestVerdict, ResponseVerdict, Rewrite, Route as GuardRoute, Subject, Text,
};
pub use limits::ComponentLimits;
pub use skill::{Skill, SkillSpec};
pub use state::{
    Capabilities, ElicitOutcome, Elicitor, Invocation, LogLine, LogSink, ModelAccess, Progress, ProgressSink,
    ToolAccess,
};
pub use tool_server::{Annotations, Catalog, MAX_COMPLETIONS, ToolServer, ToolSpec};

use state::CallState;
use tollgate_plugin_host::PluginEngine;

/// The sandbox stopped a component (trap, limit) or its answer broke a host
/// rule (too large, not JSON). Only the current call is affected.
#[derive(Debug, Clone, thiserror::Error)]
#[error("component '{component}' failed: {reason}")]
pub struct ComponentFault {
    pub component: Arc<str>,
    pub reason: String,
}

/// Why a call did not answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The tool reported a failure for its caller to read.
    #[error("{}", .0.message)]
    Tool(ToolError),
    /// The skill reported a failure for its caller to read.
    #[error("{}", skill::describe_skill_error(.0))]
    Skill(SkillError),
    #[error(transparent)]
    Fault(ComponentFault),
}

/// Shared by every tool server and skill: the engine, the compiled-component
/// cache, the limits, and the outbound HTTP policy. Cheap to clone.
#[derive(Clone)]
pub struct ComponentHost {
    inner: Arc<Inner>,
}

struct Inner {
    engine: wasmtime::Engine,
    ticker: tollgate_plugin_host::Ticker,
    /// Drops used stores off the request path (resetting a pool slot costs
    /// tens of microseconds).
    warmer: tollgate_plugin_host::Warmer,
    memory_cap: usize,
    /// Stores each used guardrail keeps instantiated ahead of need.
    keep_ready: usize,
    /// Stores kept ready across every guardrail, and the most there may be:
    /// installs are the tenants' to multiply, pool slots are not.
    ready: AtomicUsize,
    max_ready: usize,
    cache_dir: PathBuf,
    limits: Arc<ComponentLimits>,
    egress: Arc<Egress>,
}

impl ComponentHost {
    pub fn new(engine: &PluginEngine, cache_dir: &Path, limits: ComponentLimits) -> anyhow::Result<Self> {
        limits.check()?;
        std::fs::create_dir_all(cache_dir)
            .map_err(|e| anyhow::anyhow!("cannot create cache dir {}: {e}", cache_dir.display()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine: engine.wasmtime().clone(),
                ticker: engine.ticker().clone(),
                warmer: engine.warmer().clone(),
                memory_cap: engine.memory_cap(),
                keep_ready: engine.keep_ready(),
                ready: AtomicUsize::new(0),
                max_ready: engine.max_instances() as usize / 8,
                cache_dir: cache_dir.to_path_buf(),
                egress: Arc::new(Egress::new(&limits.allow_internal_origins)?),
                limits: Arc::new(limits),
            }),
        })
    }

    /// Loads a tool server. Blocking (compiling takes a while): call it off the
    /// async workers, inside the runtime.
    pub fn load_tool_server(&self, name: &str, bytes: &[u8]) -> anyhow::Result<Arc<ToolServer>> {
        Ok(Arc::new(ToolServer::load(self, name, bytes)?))
    }

    /// Loads a guardrail. Blocking, like [`load_tool_server`](Self::load_tool_server).
    pub fn load_guardrail(&self, name: &str, bytes: &[u8]) -> anyhow::Result<Arc<Guardrail>> {
        Ok(Arc::new(Guardrail::load(self, name, bytes)?))
    }

    /// Loads a skill. Blocking, like [`load_tool_server`](Self::load_tool_server).
    pub fn load_skill(&self, name: &str, bytes: &[u8]) -> anyhow::Result<Arc<Skill>> {
        Ok(Arc::new(Skill::load(self, name, bytes)?))
    }

    pub fn limits(&self) -> &ComponentLimits {
        &self.inner.limits
    }

    /// Where components' outbound HTTP may go; installs check their origins with it.
    pub fn egress(&self) -> &Egress {
        &self.inner.egress
    }

    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        &self.inner.engine
    }

    pub(crate) fn compile(&self, bytes: &[u8]) -> anyhow::Result<wasmtime::component::Component> {
        tollgate_plugin_host::load_component(&self.inner.engine, bytes, &self.inner.cache_dir)
    }

    /// Drops a used store on the warmer thread (or here, when it is behind).
    pub(crate) fn discard(&self, store: wasmtime::Store<CallState>) {
        self.inner.warmer.discard(Box::new(store));
    }

    /// Stores a used guardrail keeps ready.
    pub(crate) fn keep_ready(&self) -> usize {
        self.inner.keep_ready
    }

    /// Takes one place for a ready store; false when every place is taken.
    pub(crate) fn reserve_ready(&self) -> bool {
        let max = self.inner.max_ready;
        self.inner
            .ready
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held < max).then_some(held + 1)
            })
            .is_ok()
    }

    /// Gives back `count` places (ready stores taken by calls, or dropped).
    pub(crate) fn release_ready(&self, count: usize) {
        self.inner.ready.fetch_sub(count, Ordering::SeqCst);
    }

    /// The thread that makes ready stores and drops used ones; serving wakes
    /// it after each response ([`tollgate_plugin_host::Warmer::flush`]).
    pub fn warmer(&self) -> &tollgate_plugin_host::Warmer {
        &self.inner.warmer
    }

    pub(crate) fn awake(&self) -> tollgate_plugin_host::Awake {
        self.inner.ticker.awake()
    }

    pub(crate) fn call_state(
        &self,
        invocation: Invocation,
        grants: Arc<Grants>,
        capabilities: Capabilities,
        runtime: tokio::runtime::Handle,
    ) -> CallState {
        CallState::new(
            self.inner.limits.clone(),
            self.inner.memory_cap,
            invocation,
            grants,
            capabilities,
            self.inner.egress.clone(),
            runtime,
            Some(self.inner.ticker.awake()),
        )
    }
}

/// The `types` interface has no functions; the linker still wants its host.
impl bindings::tool_server::tollgate::host::types::Host for CallState {}
