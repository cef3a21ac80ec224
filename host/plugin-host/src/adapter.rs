//! One provider adapter: its pre-linked component and the per-request [`Session`]
//! that drives the `exchange` resource inside a fresh, capped store, made
//! ready before the request asked for it (`warm.rs`).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::{Linker, ResourceAny};
use wasmtime::{ResourceLimiter, Store, Trap, UpdateDeadline};

use super::cache::load_component;
use super::engine::PluginEngine;
use super::guest_clock::{GuestClock, Overrun};
use super::warm::{Refill, Warmer};

/// `tollgate:provider@0.1.0`: translated mode only.
mod v1 {
    wasmtime::component::bindgen!({
        path: "../../wit/provider/0.1.0",
        world: "provider-adapter",
    });
}

/// `tollgate:provider@0.2.0`: the same types and exchange, plus the native
/// lane (`native-dialects`, `open-native`, `native-events`, `native-finish`).
/// Its `types` interface is structurally the same as 0.1.0's, so both share
/// one set of Rust types.
mod v2 {
    wasmtime::component::bindgen!({
        path: "../../wit/provider/0.2.0",
        world: "provider-adapter",
        with: {
            "tollgate:provider/types@0.2.0": super::v1::tollgate::provider::types,
        },
    });
}

/// `tollgate:provider@0.3.0`: 0.2.0 plus the operations besides chat
/// (`operations`, `open-operation`, `operation-response`, `measured`). Its
/// `types` interface is 0.1.0's too.
mod v3 {
    wasmtime::component::bindgen!({
        path: "../../wit/provider/0.3.0",
        world: "provider-adapter",
        with: {
            "tollgate:provider/types@0.3.0": super::v1::tollgate::provider::types,
        },
    });
}

pub use v1::exports::tollgate::provider::adapter::CallContext;
pub use v1::tollgate::provider::types::{
    AdapterError, AuthSlot, ErrorClass, Event, OutboundRequest, ResponseHead, Usage,
};
pub use v3::tollgate::provider::operations::{FormPart, Measured, Operation, OperationAnswer, OperationBody};

/// The 0.2.0 form of a call context (the same fields).
fn v2_context(ctx: &CallContext) -> v2::exports::tollgate::provider::adapter::CallContext {
    v2::exports::tollgate::provider::adapter::CallContext {
        request_id: ctx.request_id.clone(),
        upstream_model: ctx.upstream_model.clone(),
        base_url: ctx.base_url.clone(),
        stream: ctx.stream,
        attempt: ctx.attempt,
        max_output_tokens: ctx.max_output_tokens,
        continuation: ctx.continuation.clone(),
    }
}

/// The 0.3.0 form of a call context (the same fields).
fn v3_context(ctx: &CallContext) -> v3::exports::tollgate::provider::adapter::CallContext {
    v3::exports::tollgate::provider::adapter::CallContext {
        request_id: ctx.request_id.clone(),
        upstream_model: ctx.upstream_model.clone(),
        base_url: ctx.base_url.clone(),
        stream: ctx.stream,
        attempt: ctx.attempt,
        max_output_tokens: ctx.max_output_tokens,
        continuation: ctx.continuation.clone(),
    }
}

/// Most operations an adapter may declare (there are eight).
const MAX_OPERATIONS: usize = 16;

/// Most native dialects an adapter may declare, and the longest name.
const MAX_DIALECTS: usize = 16;
const MAX_DIALECT_NAME: usize = 64;

/// Per-instance state: enforces the memory cap and remembers why a call died.
pub struct InstanceState {
    memory_cap: usize,
    memory_cap_hit: bool,
    /// Keeps the epoch ticker running while this store runs guest code:
    /// while it is instantiated, and for the request that uses it. Not while
    /// it waits, ready, so an idle gateway lets the ticker sleep.
    awake: Option<crate::Awake>,
    /// The current call's CPU budget (instantiation counts as a call).
    clock: GuestClock,
    /// Set when the clock stopped the guest, so the fault says so.
    overrun: Option<Overrun>,
}

impl ResourceLimiter for InstanceState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.memory_cap_hit = true;
            wasmtime::bail!("adapter memory cap exceeded");
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// The sandbox stopped the adapter (trap, time or memory limit): the adapter
/// failed, not the upstream. Only the current request is affected.
#[derive(Debug, Clone, thiserror::Error)]
#[error("provider adapter '{adapter}' failed: {reason}")]
pub struct AdapterFault {
    pub adapter: Arc<str>,
    pub reason: String,
}

/// Either the sandbox stopped the adapter, or the adapter reported an error.
#[derive(Debug)]
pub enum ExchangeError {
    Fault(AdapterFault),
    Reported(AdapterError),
}

impl From<AdapterFault> for ExchangeError {
    fn from(fault: AdapterFault) -> Self {
        ExchangeError::Fault(fault)
    }
}

/// A loaded adapter's pre-linked component, by the WIT version it exports.
enum Pre {
    V1(v1::ProviderAdapterPre<InstanceState>),
    V2(v2::ProviderAdapterPre<InstanceState>),
    V3(v3::ProviderAdapterPre<InstanceState>),
}

/// An instantiated adapter's bindings, by WIT version.
enum Bindings {
    V1(v1::ProviderAdapter),
    V2(v2::ProviderAdapter),
    V3(v3::ProviderAdapter),
}

pub struct LoadedAdapter {
    pub name: Arc<str>,
    blueprint: Arc<Blueprint>,
    /// The dialects a 0.2.0 adapter takes natively; none for 0.1.0.
    native_dialects: Vec<String>,
    /// The operations besides chat a 0.3.0 adapter serves; none before.
    operations: Vec<Operation>,
}

/// Everything it takes to make an instance of the adapter, and the instances
/// made ahead of need.
struct Blueprint {
    name: Arc<str>,
    limits: EngineLimits,
    ticker: crate::Ticker,
    pre: Pre,
    ready: Mutex<Vec<Instance>>,
    /// Ready instances to keep (0 when the engine's pool is too small to
    /// spare slots).
    keep_ready: usize,
    /// Instances asked of the warmer and not made yet.
    refilling: AtomicUsize,
    /// Requests that found no instance ready and made their own.
    made_inline: AtomicUsize,
    warmer: Warmer,
}

/// An instantiated adapter in its own store, before any exchange.
struct Instance {
    store: Store<InstanceState>,
    bindings: Bindings,
}

#[derive(Clone, Copy)]
struct EngineLimits {
    memory_cap: usize,
    call_timeout_ms: u64,
}

/// A call is cut after this many times its CPU budget in wall time, however
/// little it ran: a loaded machine may slow an adapter, not hold it forever.
const WALL_BACKSTOP_FACTOR: u32 = 10;

impl EngineLimits {
    fn guest_clock(&self) -> GuestClock {
        let budget = Duration::from_millis(self.call_timeout_ms);
        GuestClock::new(budget, budget * WALL_BACKSTOP_FACTOR)
    }
}

/// Looks at the guest's clock on every epoch tick while it runs, and stops
/// it once the call has used its budget.
fn watch_guest_time(store: &mut Store<InstanceState>) {
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut context| {
        let state = context.data_mut();
        match state.clock.charge() {
            Ok(()) => Ok(UpdateDeadline::Continue(1)),
            Err(overrun) => {
                state.overrun = Some(overrun);
                Err(Trap::Interrupt.into())
            }
        }
    });
}

impl LoadedAdapter {
    /// Loads a component exporting `tollgate:provider/adapter` at 0.3.0,
    /// 0.2.0 or 0.1.0. A 0.2.0 or later adapter is asked once, here, which
    /// dialects it takes natively; a 0.3.0 one, which operations it serves.
    pub fn load(engine: &PluginEngine, name: &str, bytes: &[u8], cache_dir: &Path) -> anyhow::Result<Self> {
        let component = load_component(&engine.engine, bytes, cache_dir)?;
        let mut linker = Linker::new(&engine.engine);
        // Adapters get no capabilities: whatever they import traps when called.
        linker.define_unknown_imports_as_traps(&component)?;
        let instance_pre = linker.instantiate_pre(&component)?;
        let pre = match v3::ProviderAdapterPre::new(instance_pre.clone()) {
            Ok(pre) => Pre::V3(pre),
            Err(v3_error) => match v2::ProviderAdapterPre::new(instance_pre.clone()) {
                Ok(pre) => Pre::V2(pre),
                Err(v2_error) => match v1::ProviderAdapterPre::new(instance_pre) {
                    Ok(pre) => Pre::V1(pre),
                    Err(v1_error) => anyhow::bail!(
                        "not a tollgate:provider/adapter@0.1.0 component: {v1_error} \
                         (nor a 0.2.0 one: {v2_error}; nor a 0.3.0 one: {v3_error})"
                    ),
                },
            },
        };
        let name: Arc<str> = Arc::from(name);
        let blueprint = Arc::new(Blueprint {
            name: name.clone(),
            limits: EngineLimits {
                memory_cap: engine.memory_cap,
                call_timeout_ms: engine.call_timeout_ms,
            },
            ticker: engine.ticker.clone(),
            pre,
            ready: Mutex::new(Vec::new()),
            keep_ready: engine.keep_ready,
            refilling: AtomicUsize::new(0),
            made_inline: AtomicUsize::new(0),
            warmer: engine.warmer.clone(),
        });
        let mut adapter = Self {
            name,
            blueprint,
            native_dialects: Vec::new(),
            operations: Vec::new(),
        };
        if !matches!(adapter.blueprint.pre, Pre::V1(_)) {
            let mut session = adapter.session(adapter.blueprint.instantiate()?);
            let (dialects, operations) = session.call(|bindings, store| match bindings {
                Bindings::V3(b) => Ok((
                    b.tollgate_provider_adapter().call_native_dialects(&mut *store)?,
                    b.tollgate_provider_adapter().call_operations(store)?,
                )),
                Bindings::V2(b) => Ok((b.tollgate_provider_adapter().call_native_dialects(store)?, Vec::new())),
                Bindings::V1(_) => Ok((Vec::new(), Vec::new())),
            })?;
            if operations.len() > MAX_OPERATIONS {
                anyhow::bail!("adapter '{}' declares too many operations", adapter.name);
            }
            adapter.operations = operations;
            if dialects.len() > MAX_DIALECTS || dialects.iter().any(|d| d.is_empty() || d.len() > MAX_DIALECT_NAME) {
                anyhow::bail!(
                    "adapter '{}' declares too many or malformed native dialects",
                    adapter.name
                );
            }
            adapter.native_dialects = dialects;
        }
        Ok(adapter)
    }

    /// The WIT version of `tollgate:provider` the adapter exports.
    pub fn wit_version(&self) -> &'static str {
        match self.blueprint.pre {
            Pre::V1(_) => "0.1.0",
            Pre::V2(_) => "0.2.0",
            Pre::V3(_) => "0.3.0",
        }
    }

    /// The operations besides chat the adapter serves (none before 0.3.0).
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// Whether the adapter serves `operation`.
    pub fn serves(&self, operation: Operation) -> bool {
        self.operations.contains(&operation)
    }

    /// The request dialects the adapter takes natively (none for 0.1.0).
    pub fn native_dialects(&self) -> &[String] {
        &self.native_dialects
    }

    /// Whether the adapter takes `dialect` natively.
    pub fn takes_natively(&self, dialect: &str) -> bool {
        self.native_dialects.iter().any(|d| d == dialect)
    }

    /// A fresh instance in a fresh, capped store, without an exchange: a
    /// ready one when there is one, and the warmer makes its replacement.
    fn instantiate(&self) -> Result<Session, AdapterFault> {
        let (ready, left) = self.blueprint.take_ready();
        Blueprint::top_up(&self.blueprint, left);
        let instance = match ready {
            Some(mut instance) => {
                // It waited without a ticker guard; it runs guest code now.
                instance.store.data_mut().awake = Some(self.blueprint.ticker.awake());
                instance
            }
            None => {
                self.blueprint.made_inline.fetch_add(1, Ordering::Relaxed);
                self.blueprint.instantiate()?
            }
        };
        Ok(self.session(instance))
    }

    fn session(&self, instance: Instance) -> Session {
        Session {
            adapter: self.name.clone(),
            limits: self.blueprint.limits,
            warmer: self.blueprint.warmer.clone(),
            store: Some(instance.store),
            bindings: instance.bindings,
            exchange: None,
            native: false,
        }
    }

    /// Instances ready now (for tests).
    #[doc(hidden)]
    pub fn ready_instances(&self) -> usize {
        self.blueprint.ready.lock().expect("ready lock poisoned").len()
    }

    /// Requests that found no instance ready (for tests).
    #[doc(hidden)]
    pub fn instantiated_inline(&self) -> usize {
        self.blueprint.made_inline.load(Ordering::Relaxed)
    }

    /// Instantiates the adapter in a fresh store and opens an exchange in
    /// translated mode (the caller's chat-completions body).
    pub fn open(&self, ctx: &CallContext, openai_body: &[u8]) -> Result<Session, AdapterFault> {
        let mut session = self.instantiate()?;
        let exchange = session.call(|bindings, store| match bindings {
            Bindings::V1(b) => b
                .tollgate_provider_adapter()
                .exchange()
                .call_constructor(store, ctx, openai_body),
            Bindings::V2(b) => {
                b.tollgate_provider_adapter()
                    .exchange()
                    .call_constructor(store, &v2_context(ctx), openai_body)
            }
            Bindings::V3(b) => {
                b.tollgate_provider_adapter()
                    .exchange()
                    .call_constructor(store, &v3_context(ctx), openai_body)
            }
        })?;
        session.exchange = Some(exchange);
        Ok(session)
    }

    /// Instantiates the adapter and opens an exchange in native mode: `body`
    /// is the caller's request in `dialect`, which the adapter must list in
    /// [`native_dialects`](Self::native_dialects).
    pub fn open_native(&self, ctx: &CallContext, dialect: &str, body: &[u8]) -> Result<Session, AdapterFault> {
        if !self.takes_natively(dialect) {
            return Err(AdapterFault {
                adapter: self.name.clone(),
                reason: format!("does not take the '{dialect}' dialect natively"),
            });
        }
        let mut session = self.instantiate()?;
        let exchange = session.call(|bindings, store| match bindings {
            Bindings::V2(b) => {
                b.tollgate_provider_adapter()
                    .exchange()
                    .call_open_native(store, &v2_context(ctx), dialect, body)
            }
            Bindings::V3(b) => {
                b.tollgate_provider_adapter()
                    .exchange()
                    .call_open_native(store, &v3_context(ctx), dialect, body)
            }
            Bindings::V1(_) => unreachable!("a 0.1.0 adapter has no native dialects"),
        })?;
        session.exchange = Some(exchange);
        session.native = true;
        Ok(session)
    }

    /// Instantiates the adapter and opens an exchange in operation mode:
    /// `body` is the caller's request for `operation`, which the adapter must
    /// list in [`operations`](Self::operations).
    pub fn open_operation(
        &self,
        ctx: &CallContext,
        operation: Operation,
        body: &OperationBody,
    ) -> Result<Session, AdapterFault> {
        if !self.serves(operation) {
            return Err(AdapterFault {
                adapter: self.name.clone(),
                reason: format!("does not serve the {operation:?} operation"),
            });
        }
        let mut session = self.instantiate()?;
        let exchange = session.call(|bindings, store| match bindings {
            Bindings::V3(b) => {
                b.tollgate_provider_adapter()
                    .exchange()
                    .call_open_operation(store, &v3_context(ctx), operation, body)
            }
            Bindings::V1(_) | Bindings::V2(_) => unreachable!("only a 0.3.0 adapter serves operations"),
        })?;
        session.exchange = Some(exchange);
        Ok(session)
    }
}

impl Blueprint {
    /// A new instance in a new, capped store. The ticker runs meanwhile,
    /// because instantiating runs the component's start code.
    fn instantiate(&self) -> Result<Instance, AdapterFault> {
        let state = InstanceState {
            memory_cap: self.limits.memory_cap,
            memory_cap_hit: false,
            awake: Some(self.ticker.awake()),
            clock: self.limits.guest_clock(),
            overrun: None,
        };
        let engine = match &self.pre {
            Pre::V1(pre) => pre.engine(),
            Pre::V2(pre) => pre.engine(),
            Pre::V3(pre) => pre.engine(),
        };
        let mut store = Store::new(engine, state);
        store.limiter(|state| state);
        watch_guest_time(&mut store);
        store.data_mut().clock.restart();
        let bindings = match &self.pre {
            Pre::V1(pre) => pre.instantiate(&mut store).map(Bindings::V1),
            Pre::V2(pre) => pre.instantiate(&mut store).map(Bindings::V2),
            Pre::V3(pre) => pre.instantiate(&mut store).map(Bindings::V3),
        };
        match bindings {
            Ok(bindings) => Ok(Instance { store, bindings }),
            Err(e) => Err(AdapterFault {
                adapter: self.name.clone(),
                reason: match store.data().overrun {
                    Some(_) => format!(
                        "could not be instantiated: exceeded its time limit ({} ms per call)",
                        self.limits.call_timeout_ms
                    ),
                    None => format!("could not be instantiated: {e}"),
                },
            }),
        }
    }

    /// A ready instance if there is one, and how many are left.
    fn take_ready(&self) -> (Option<Instance>, usize) {
        let mut ready = self.ready.lock().expect("ready lock poisoned");
        (ready.pop(), ready.len())
    }

    /// Asks the warmer for one more instance unless enough are ready or on
    /// their way.
    fn top_up(this: &Arc<Self>, ready: usize) {
        let refilling = this.refilling.fetch_add(1, Ordering::SeqCst);
        if ready + refilling >= this.keep_ready {
            this.refilling.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if !this.warmer.refill(this.clone()) {
            this.refilling.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Refill for Blueprint {
    fn refill(&self) {
        match self.instantiate() {
            Ok(mut instance) => {
                instance.store.data_mut().awake = None;
                self.ready.lock().expect("ready lock poisoned").push(instance);
            }
            // The request that takes its place instantiates inline and
            // meets the same fault; it is reported there.
            Err(fault) => tracing::debug!(%fault, "could not make an adapter instance ready"),
        }
        self.refilling.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One request's adapter instance. Dropping it hands the store to the warmer
/// thread, which drops it and so frees its pool slot.
pub struct Session {
    adapter: Arc<str>,
    limits: EngineLimits,
    /// Where the store goes to be dropped, off the request's thread.
    warmer: Warmer,
    /// Always `Some` until the session drops.
    store: Option<Store<InstanceState>>,
    bindings: Bindings,
    exchange: Option<ResourceAny>,
    native: bool,
}

/// Calls the same exchange method on whichever version the session runs.
macro_rules! on_exchange {
    ($session:ident, $this:ident, |$e:ident, $s:ident| $call:expr) => {{
        $session.call(|bindings, $s| match bindings {
            Bindings::V1(b) => {
                let $e = b.tollgate_provider_adapter().exchange();
                $call
            }
            Bindings::V2(b) => {
                let $e = b.tollgate_provider_adapter().exchange();
                $call
            }
            Bindings::V3(b) => {
                let $e = b.tollgate_provider_adapter().exchange();
                $call
            }
        })
    }};
}

impl Session {
    /// Whether the exchange was opened in native mode.
    pub fn is_native(&self) -> bool {
        self.native
    }

    pub fn request(&mut self) -> Result<OutboundRequest, ExchangeError> {
        let this = self.exchange();
        on_exchange!(self, this, |e, s| e.call_request(s, this))?.map_err(ExchangeError::Reported)
    }

    /// A whole 2xx answer: a `chat.completion` in translated mode, the
    /// dialect's answer in native mode.
    pub fn response(&mut self, head: &ResponseHead, body: &[u8]) -> Result<Vec<u8>, ExchangeError> {
        let this = self.exchange();
        on_exchange!(self, this, |e, s| e.call_response(s, this, head, body))?.map_err(ExchangeError::Reported)
    }

    pub fn on_events(&mut self, events: &[Event]) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let this = self.exchange();
        on_exchange!(self, this, |e, s| e.call_on_events(s, this, events))?.map_err(ExchangeError::Reported)
    }

    pub fn finish(&mut self) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let this = self.exchange();
        on_exchange!(self, this, |e, s| e.call_finish(s, this))?.map_err(ExchangeError::Reported)
    }

    /// Native mode: stream events in the dialect, to relay as returned.
    pub fn native_events(&mut self, events: &[Event]) -> Result<Vec<Event>, ExchangeError> {
        let this = self.exchange();
        self.call(|bindings, store| match bindings {
            Bindings::V2(b) => b
                .tollgate_provider_adapter()
                .exchange()
                .call_native_events(store, this, events),
            Bindings::V3(b) => b
                .tollgate_provider_adapter()
                .exchange()
                .call_native_events(store, this, events),
            Bindings::V1(_) => Ok(Err(not_native())),
        })?
        .map_err(ExchangeError::Reported)
    }

    /// Native mode: the upstream stream ended; events still held back.
    pub fn native_finish(&mut self) -> Result<Vec<Event>, ExchangeError> {
        let this = self.exchange();
        self.call(|bindings, store| match bindings {
            Bindings::V2(b) => b.tollgate_provider_adapter().exchange().call_native_finish(store, this),
            Bindings::V3(b) => b.tollgate_provider_adapter().exchange().call_native_finish(store, this),
            Bindings::V1(_) => Ok(Err(not_native())),
        })?
        .map_err(ExchangeError::Reported)
    }

    /// Operation mode: a whole 2xx answer, in the operation's OpenAI shape.
    pub fn operation_response(&mut self, head: &ResponseHead, body: &[u8]) -> Result<OperationAnswer, ExchangeError> {
        let this = self.exchange();
        self.call(|bindings, store| match bindings {
            Bindings::V3(b) => b
                .tollgate_provider_adapter()
                .exchange()
                .call_operation_response(store, this, head, body),
            Bindings::V1(_) | Bindings::V2(_) => Ok(Err(not_operation())),
        })?
        .map_err(ExchangeError::Reported)
    }

    /// Operation mode: what the exchange consumed, as far as reported.
    pub fn measured(&mut self) -> Result<Option<Measured>, AdapterFault> {
        let this = self.exchange();
        self.call(|bindings, store| match bindings {
            Bindings::V3(b) => b.tollgate_provider_adapter().exchange().call_measured(store, this),
            Bindings::V1(_) | Bindings::V2(_) => Ok(None),
        })
    }

    pub fn usage(&mut self) -> Result<Option<Usage>, AdapterFault> {
        let this = self.exchange();
        on_exchange!(self, this, |e, s| e.call_usage(s, this))
    }

    pub fn classify_error(&mut self, head: &ResponseHead, body: &[u8]) -> Result<AdapterError, AdapterFault> {
        let this = self.exchange();
        on_exchange!(self, this, |e, s| e.call_classify_error(s, this, head, body))
    }

    fn exchange(&self) -> ResourceAny {
        self.exchange.expect("exchange is opened in LoadedAdapter::open")
    }

    /// Runs one guest call under a fresh epoch deadline, turning any trap into an
    /// [`AdapterFault`] that names the adapter and the reason.
    fn call<R>(
        &mut self,
        f: impl FnOnce(&Bindings, &mut Store<InstanceState>) -> wasmtime::Result<R>,
    ) -> Result<R, AdapterFault> {
        let store = self.store.as_mut().expect("the store lives as long as the session");
        store.data_mut().clock.restart();
        store.data_mut().overrun = None;
        store.set_epoch_deadline(1);
        f(&self.bindings, store).map_err(|error| AdapterFault {
            adapter: self.adapter.clone(),
            reason: self.describe(&error),
        })
    }

    fn describe(&self, error: &wasmtime::Error) -> String {
        if self.store.as_ref().is_some_and(|store| store.data().memory_cap_hit) {
            return format!("exceeded its memory limit ({} MiB)", self.limits.memory_cap >> 20);
        }
        if self.store.as_ref().is_some_and(|store| store.data().overrun.is_some()) {
            return format!("exceeded its time limit ({} ms per call)", self.limits.call_timeout_ms);
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::UnreachableCodeReached) => "trapped (the adapter panicked or hit unreachable code)".into(),
            Some(trap) => format!("trapped: {trap}"),
            // Imports are linked to traps: a Rust panic, for one, first asks WASI
            // for the environment and stops there.
            None => format!("trapped: {}", error.root_cause()),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            self.warmer.discard(Box::new(store));
        }
    }
}

/// A session before 0.3.0 asked for an operation's answer (the host never
/// does this).
fn not_operation() -> AdapterError {
    AdapterError {
        class: ErrorClass::Internal,
        message: "the exchange is not in operation mode".into(),
    }
}

/// A 0.1.0 session asked for a native call (the host never does this).
fn not_native() -> AdapterError {
    AdapterError {
        class: ErrorClass::Internal,
        message: "the exchange is not in native mode".into(),
    }
}
