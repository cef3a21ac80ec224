//! A loaded guardrail: its pre-linked component, the hooks it said it has
//! when loaded, and checks, each in a fresh store with the install's grants
//! and, where its package asks for it, the caller's metered model access.
//!
//! Like an adapter, a used guardrail keeps a few stores instantiated ahead of
//! need on the warmer thread (instantiating costs tens of microseconds, a
//! no-op check a few): made for no one, with nothing granted, having run
//! nothing but the component's start code; a check binds one to its caller
//! and uses it once. The host caps how many stores all guardrails keep.
//!
//! The host keeps the shape of what it checks: a request rewrite must give
//! back exactly as many texts as it was given, and so must an answer
//! rewrite; anything else is a fault, handled like a trap.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::Store;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::CallContext;
use crate::bindings::guardrail::exports::tollgate::guardrail::checks;
use crate::bindings::guardrail::{Guardrail as GuardrailWorld, GuardrailPre};
use crate::grants::Grants;
use crate::state::{CallState, Capabilities, Invocation, describe_fault, new_store};
use crate::{ComponentFault, ComponentHost};
use tollgate_plugin_host::Refill;

pub use checks::{RequestVerdict, ResponseVerdict, Rewrite, Route, Subject, Text};

/// Largest memo a guardrail may leave for its response check, in bytes.
const MAX_MEMO_BYTES: usize = 256 << 10;

/// What a guardrail said about itself when loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardrailSpec {
    pub name: String,
    pub description: String,
    pub checks_requests: bool,
    pub checks_responses: bool,
}

pub struct Guardrail {
    name: Arc<str>,
    host: ComponentHost,
    pre: GuardrailPre<CallState>,
    spec: GuardrailSpec,
    /// The gateway's runtime, for stores made on the warmer thread.
    runtime: tokio::runtime::Handle,
    ready: Mutex<Vec<Ready>>,
    /// Stores asked of the warmer and not made yet.
    refilling: AtomicUsize,
}

/// A store instantiated ahead of need, waiting for its check.
struct Ready {
    store: Store<CallState>,
    bindings: GuardrailWorld,
}

/// One check's inputs, owned so it can move to another thread.
pub struct Check {
    pub invocation: Invocation,
    pub grants: Arc<Grants>,
    pub capabilities: Capabilities,
    pub subject: Subject,
    /// The request as JSON (read-only context for the guardrail).
    pub request: Arc<str>,
}

impl Guardrail {
    /// Compiles (or takes from the cache) `bytes`, links the guardrail
    /// world's host interfaces, and asks the component to describe itself.
    /// Blocking: call it off the async workers, inside the runtime.
    pub(crate) fn load(host: &ComponentHost, name: &str, bytes: &[u8]) -> anyhow::Result<Self> {
        let component = host.compile(bytes)?;
        let mut linker = Linker::new(host.engine());
        GuardrailWorld::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        crate::random::link(&mut linker, &component, host.engine())?;
        // Anything else it imports (WASI, which Rust's std declares) traps.
        linker.define_unknown_imports_as_traps(&component)?;
        let pre = GuardrailPre::new(linker.instantiate_pre(&component)?)
            .map_err(|e| anyhow::anyhow!("not a tollgate:guardrail/guardrail@0.1.0 component: {e}"))?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("guardrails are loaded inside the gateway's runtime"))?;
        let invocation = Invocation {
            request_id: "load".into(),
            workspace: String::new(),
            install: name.into(),
            depth: 0,
            logs: None,
            progress: None,
            elicit: None,
        };
        let state = host.call_state(invocation, Arc::default(), Capabilities::default(), runtime.clone());
        let mut store = new_store(host.engine(), state);
        let described = pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.tollgate_guardrail_checks().call_describe(&mut store))
            .map_err(|error| anyhow::anyhow!("describe {}", describe_fault(&store, &error)))?;
        Ok(Self {
            name: Arc::from(name),
            host: host.clone(),
            pre,
            spec: GuardrailSpec {
                name: described.name,
                description: described.description,
                checks_requests: described.checks_requests,
                checks_responses: described.checks_responses,
            },
            runtime,
            ready: Mutex::new(Vec::new()),
            refilling: AtomicUsize::new(0),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn spec(&self) -> &GuardrailSpec {
        &self.spec
    }

    /// Checks a request's texts. A rewrite comes back with exactly as many
    /// texts as were given, and a memo within its cap; else it is a fault.
    pub async fn check_request(
        self: &Arc<Self>,
        check: Check,
        texts: Vec<Text>,
    ) -> Result<RequestVerdict, ComponentFault> {
        let given = texts.len();
        let verdict = self
            .run(check, move |this, store, bindings, context, subject, request| {
                bindings
                    .tollgate_guardrail_checks()
                    .call_check_request(&mut *store, context, subject, request, &texts)
                    .map_err(|error| this.fault(describe_fault(store, &error)))
            })
            .await?;
        if let RequestVerdict::Rewrite(rewrite) = &verdict {
            if rewrite.texts.len() != given {
                return Err(self.fault(format!(
                    "rewrote {given} request texts into {}; a rewrite replaces each text, one for one",
                    rewrite.texts.len()
                )));
            }
            if rewrite.memo.as_ref().is_some_and(|memo| memo.len() > MAX_MEMO_BYTES) {
                return Err(self.fault(format!("left a memo over the {MAX_MEMO_BYTES}-byte limit")));
            }
            self.check_size(rewrite.texts.iter().map(String::len).sum())?;
        }
        Ok(verdict)
    }

    /// Checks an answer's texts (one per choice), or a stream's window of
    /// them. A rewrite comes back with exactly as many texts as were given.
    pub async fn check_response(
        self: &Arc<Self>,
        check: Check,
        memo: Option<String>,
        texts: Vec<String>,
        done: bool,
    ) -> Result<ResponseVerdict, ComponentFault> {
        let given = texts.len();
        let verdict = self
            .run(check, move |this, store, bindings, context, subject, request| {
                bindings
                    .tollgate_guardrail_checks()
                    .call_check_response(&mut *store, context, subject, request, memo.as_deref(), &texts, done)
                    .map_err(|error| this.fault(describe_fault(store, &error)))
            })
            .await?;
        if let ResponseVerdict::Rewrite(rewritten) = &verdict {
            if rewritten.len() != given {
                return Err(self.fault(format!(
                    "rewrote {given} answer texts into {}; a rewrite replaces each text, one for one",
                    rewritten.len()
                )));
            }
            self.check_size(rewritten.iter().map(String::len).sum())?;
        }
        Ok(verdict)
    }

    /// Runs one hook in a fresh store. A check that can make no blocking
    /// host call (no model access, no approved origin: everything else it
    /// may import answers at once) runs in place on the caller's thread,
    /// bounded by its compute and wall limits, as an adapter's translation
    /// does: a handoff to another thread would cost more than most checks.
    /// One that may block runs where blocking is allowed: in place on the
    /// multi-threaded runtime (the worker's other tasks move for the while),
    /// else on the blocking pool.
    async fn run<T, F>(self: &Arc<Self>, check: Check, hook: F) -> Result<T, ComponentFault>
    where
        T: Send + 'static,
        F: FnOnce(
                &Self,
                &mut wasmtime::Store<CallState>,
                &crate::bindings::guardrail::Guardrail,
                &CallContext,
                &Subject,
                &str,
            ) -> Result<T, ComponentFault>
            + Send
            + 'static,
    {
        let runtime = tokio::runtime::Handle::current();
        let may_block = check.capabilities.models.is_some() || !check.grants.origins.is_empty();
        let flavor = runtime.runtime_flavor();
        let this = self.clone();
        let work = move || {
            let Check {
                invocation,
                grants,
                capabilities,
                subject,
                request,
            } = check;
            let context = CallContext {
                request_id: invocation.request_id.clone(),
                workspace: invocation.workspace.clone(),
                install: invocation.install.clone(),
            };
            let (mut store, bindings) = this.instance(invocation, grants, capabilities, runtime)?;
            let verdict = hook(&this, &mut store, &bindings, &context, &subject, &request);
            // Every check is on a request's path: its store is dropped after.
            this.host.discard(store);
            verdict
        };
        if !may_block {
            return work();
        }
        if flavor == tokio::runtime::RuntimeFlavor::MultiThread {
            return tokio::task::block_in_place(work);
        }
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            work()
        })
        .await
        .unwrap_or_else(|e| Err(self.fault(format!("its check was lost: {e}"))))
    }

    /// A store for one check, bound to its caller: a ready one when there
    /// is one (and the warmer makes its replacement), else a fresh one.
    fn instance(
        self: &Arc<Self>,
        invocation: Invocation,
        grants: Arc<Grants>,
        capabilities: Capabilities,
        runtime: tokio::runtime::Handle,
    ) -> Result<(Store<CallState>, GuardrailWorld), ComponentFault> {
        let (ready, left) = {
            let mut ready = self.ready.lock().expect("ready lock poisoned");
            (ready.pop(), ready.len())
        };
        self.top_up(left);
        if let Some(Ready { mut store, bindings }) = ready {
            self.host.release_ready(1);
            store
                .data_mut()
                .bind(invocation, grants, capabilities, runtime, self.host.awake());
            store.set_epoch_deadline(1);
            return Ok((store, bindings));
        }
        self.instantiate(self.host.call_state(invocation, grants, capabilities, runtime))
    }

    /// A fresh store for `state`, instantiated.
    fn instantiate(&self, state: CallState) -> Result<(Store<CallState>, GuardrailWorld), ComponentFault> {
        let mut store = new_store(self.host.engine(), state);
        let bindings = self
            .pre
            .instantiate(&mut store)
            .map_err(|error| self.fault(describe_fault(&store, &error)))?;
        Ok((store, bindings))
    }

    /// Asks the warmer for one more ready store unless enough are ready or
    /// on their way.
    fn top_up(self: &Arc<Self>, ready: usize) {
        let refilling = self.refilling.fetch_add(1, Ordering::SeqCst);
        if ready + refilling >= self.host.keep_ready() || !self.host.warmer().refill(self.clone()) {
            self.refilling.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A store instantiated for no one: no grants, no capabilities.
    fn make_ready(&self) -> Result<Ready, ComponentFault> {
        let invocation = Invocation {
            request_id: String::new(),
            workspace: String::new(),
            install: self.name.to_string(),
            depth: 0,
            logs: None,
            progress: None,
            elicit: None,
        };
        let state = self.host.call_state(
            invocation,
            Arc::default(),
            Capabilities::default(),
            self.runtime.clone(),
        );
        let (mut store, bindings) = self.instantiate(state)?;
        store.data_mut().park();
        Ok(Ready { store, bindings })
    }

    /// Stores ready now (for tests).
    pub fn ready_stores(&self) -> usize {
        self.ready.lock().expect("ready lock poisoned").len()
    }

    fn check_size(&self, bytes: usize) -> Result<(), ComponentFault> {
        let cap = self.host.limits().max_output_bytes;
        if bytes > cap {
            return Err(self.fault(format!("answered {bytes} bytes, more than the {cap}-byte limit")));
        }
        Ok(())
    }

    fn fault(&self, reason: String) -> ComponentFault {
        ComponentFault {
            component: self.name.clone(),
            reason,
        }
    }
}

impl Refill for Guardrail {
    fn refill(&self) {
        if self.host.reserve_ready() {
            match self.make_ready() {
                Ok(ready) => self.ready.lock().expect("ready lock poisoned").push(ready),
                Err(fault) => {
                    self.host.release_ready(1);
                    // The check that finds no store ready instantiates its
                    // own, meets the same fault and reports it.
                    tracing::debug!(%fault, "could not make a guardrail store ready");
                }
            }
        }
        self.refilling.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Guardrail {
    fn drop(&mut self) {
        let held = self.ready.get_mut().map_or(0, |ready| ready.len());
        self.host.release_ready(held);
    }
}
