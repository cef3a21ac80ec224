//! One provider adapter: its pre-linked component and the per-request [`Session`]
//! that drives the `exchange` resource inside a fresh, capped store.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::{Linker, ResourceAny};
use wasmtime::{ResourceLimiter, Store, Trap};

use super::cache::load_component;
use super::engine::PluginEngine;

wasmtime::component::bindgen!({
    path: "../../wit/provider/0.1.0",
    world: "provider-adapter",
});

pub use exports::tollgate::provider::adapter::CallContext;
pub use tollgate::provider::types::{AdapterError, AuthSlot, ErrorClass, Event, OutboundRequest, ResponseHead, Usage};

/// Per-instance state: enforces the memory cap and remembers why a call died.
pub struct InstanceState {
    memory_cap: usize,
    memory_cap_hit: bool,
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

pub struct LoadedAdapter {
    pub name: Arc<str>,
    engine_limits: EngineLimits,
    pre: ProviderAdapterPre<InstanceState>,
}

#[derive(Clone, Copy)]
struct EngineLimits {
    memory_cap: usize,
    call_deadline_ticks: u64,
    call_timeout_ms: u64,
}

impl LoadedAdapter {
    pub fn load(engine: &PluginEngine, name: &str, bytes: &[u8], cache_dir: &Path) -> anyhow::Result<Self> {
        let component = load_component(&engine.engine, bytes, cache_dir)?;
        let mut linker = Linker::new(&engine.engine);
        // Adapters get no capabilities: whatever they import traps when called.
        linker.define_unknown_imports_as_traps(&component)?;
        let instance_pre = linker.instantiate_pre(&component)?;
        let pre = ProviderAdapterPre::new(instance_pre)
            .map_err(|e| anyhow::anyhow!("not a tollgate:provider/adapter@0.1.0 component: {e}"))?;
        Ok(Self {
            name: Arc::from(name),
            engine_limits: EngineLimits {
                memory_cap: engine.memory_cap,
                call_deadline_ticks: engine.call_deadline_ticks,
                call_timeout_ms: engine.call_timeout_ms,
            },
            pre,
        })
    }

    /// Instantiates the adapter in a fresh store and opens an exchange.
    pub fn open(&self, ctx: &CallContext, openai_body: &[u8]) -> Result<Session, AdapterFault> {
        let state = InstanceState {
            memory_cap: self.engine_limits.memory_cap,
            memory_cap_hit: false,
        };
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|state| state);
        store.set_epoch_deadline(self.engine_limits.call_deadline_ticks);
        let mut session = match self.pre.instantiate(&mut store) {
            Ok(bindings) => Session {
                adapter: self.name.clone(),
                limits: self.engine_limits,
                store,
                bindings,
                exchange: None,
            },
            Err(e) => {
                return Err(AdapterFault {
                    adapter: self.name.clone(),
                    reason: format!("could not be instantiated: {e}"),
                });
            }
        };
        let exchange = session.call(|bindings, store| {
            bindings
                .tollgate_provider_adapter()
                .exchange()
                .call_constructor(store, ctx, openai_body)
        })?;
        session.exchange = Some(exchange);
        Ok(session)
    }
}

/// One request's adapter instance. Dropping it frees the instance slot.
pub struct Session {
    adapter: Arc<str>,
    limits: EngineLimits,
    store: Store<InstanceState>,
    bindings: ProviderAdapter,
    exchange: Option<ResourceAny>,
}

impl Session {
    pub fn request(&mut self) -> Result<OutboundRequest, ExchangeError> {
        let this = self.exchange();
        self.call(|b, s| b.tollgate_provider_adapter().exchange().call_request(s, this))?
            .map_err(ExchangeError::Reported)
    }

    pub fn response(&mut self, head: &ResponseHead, body: &[u8]) -> Result<Vec<u8>, ExchangeError> {
        let this = self.exchange();
        self.call(|b, s| {
            b.tollgate_provider_adapter()
                .exchange()
                .call_response(s, this, head, body)
        })?
        .map_err(ExchangeError::Reported)
    }

    pub fn on_events(&mut self, events: &[Event]) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let this = self.exchange();
        self.call(|b, s| b.tollgate_provider_adapter().exchange().call_on_events(s, this, events))?
            .map_err(ExchangeError::Reported)
    }

    pub fn finish(&mut self) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let this = self.exchange();
        self.call(|b, s| b.tollgate_provider_adapter().exchange().call_finish(s, this))?
            .map_err(ExchangeError::Reported)
    }

    pub fn usage(&mut self) -> Result<Option<Usage>, AdapterFault> {
        let this = self.exchange();
        self.call(|b, s| b.tollgate_provider_adapter().exchange().call_usage(s, this))
    }

    pub fn classify_error(&mut self, head: &ResponseHead, body: &[u8]) -> Result<AdapterError, AdapterFault> {
        let this = self.exchange();
        self.call(|b, s| {
            b.tollgate_provider_adapter()
                .exchange()
                .call_classify_error(s, this, head, body)
        })
    }

    fn exchange(&self) -> ResourceAny {
        self.exchange.expect("exchange is opened in LoadedAdapter::open")
    }

    /// Runs one guest call under a fresh epoch deadline, turning any trap into an
    /// [`AdapterFault`] that names the adapter and the reason.
    fn call<R>(
        &mut self,
        f: impl FnOnce(&ProviderAdapter, &mut Store<InstanceState>) -> wasmtime::Result<R>,
    ) -> Result<R, AdapterFault> {
        self.store.set_epoch_deadline(self.limits.call_deadline_ticks);
        f(&self.bindings, &mut self.store).map_err(|error| AdapterFault {
            adapter: self.adapter.clone(),
            reason: self.describe(&error),
        })
    }

    fn describe(&self, error: &wasmtime::Error) -> String {
        if self.store.data().memory_cap_hit {
            return format!("exceeded its memory limit ({} MiB)", self.limits.memory_cap >> 20);
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => format!("exceeded its time limit ({} ms per call)", self.limits.call_timeout_ms),
            Some(Trap::UnreachableCodeReached) => "trapped (the adapter panicked or hit unreachable code)".into(),
            Some(trap) => format!("trapped: {trap}"),
            // Imports are linked to traps: a Rust panic, for one, first asks WASI
            // for the environment and stops there.
            None => format!("trapped: {}", error.root_cause()),
        }
    }
}
