//! The plugin host: one wasmtime engine, provider adapters compiled once and kept
//! as pre-linked `InstancePre`s, and a fresh sandboxed instance per request,
//! made ready before the request comes.
//!
//! Adapters are pure translators with no capabilities (every import they declare is
//! linked to a trap), so they cannot reach the network, the filesystem or secrets.
//! Tool servers and skills share the engine and the compiled-component cache;
//! their capabilities live in `tollgate-components`.

mod adapter;
mod cache;
mod engine;
mod guest_clock;
mod ticker;
mod warm;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use arc_swap::ArcSwap;

pub use adapter::{
    AdapterError, AdapterFault, AuthSlot, CallContext, ErrorClass, Event, ExchangeError, FormPart, LoadedAdapter,
    Measured, Operation, OperationAnswer, OperationBody, OutboundRequest, ResponseHead, Session, Usage,
};
pub use cache::load_component;
pub use engine::PluginEngine;
pub use guest_clock::{GuestClock, Overrun};
pub use ticker::{Awake, EPOCH_TICK, Ticker};
pub use warm::{Refill, Warmer};

use serde::{Deserialize, Serialize};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));
}

pub use builtin::Builtin;

/// Every built-in provider adapter, compiled into the binary.
pub fn builtin_adapters() -> &'static [Builtin] {
    builtin::BUILTIN_ADAPTERS
}

/// Every built-in tool server.
pub fn builtin_tool_servers() -> &'static [Builtin] {
    builtin::BUILTIN_TOOL_SERVERS
}

/// Every built-in skill.
pub fn builtin_skills() -> &'static [Builtin] {
    builtin::BUILTIN_SKILLS
}

/// Every built-in guardrail.
pub fn builtin_guardrails() -> &'static [Builtin] {
    builtin::BUILTIN_GUARDRAILS
}

/// The public key (ed25519, base64url) the built-ins were signed with when
/// this binary was built (docs/registry.md, "Built-in packages").
pub fn builtin_signing_key() -> &'static str {
    builtin::BUILTIN_SIGNING_KEY
}

/// Loaded adapters by name: built-ins and configured files by their plain name,
/// registry installs by `namespace/name@version`. New adapters are added
/// without a restart by swapping in a new map; nothing is ever removed, so a
/// request that resolved a name keeps finding the same adapter. A lookup is
/// one atomic load. A built-in is compiled when a route first names it
/// ([`Adapters::ensure`]), not at start: compiling one costs about 10 MiB
/// of memory and a fraction of a second, and most gateways use few of them.
/// The engine lives as long as any adapter compiled with it (each
/// `InstancePre` holds it), and so does its epoch ticker.
pub struct Adapters {
    by_name: ArcSwap<HashMap<String, Arc<LoadedAdapter>>>,
    engine: PluginEngine,
    cache_dir: PathBuf,
}

impl Adapters {
    /// The engine every component shares (tool servers and skills too).
    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    /// Where compiled components are cached.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }
}

impl Adapters {
    /// Loads `files` (name → component path); built-ins load on first
    /// [`Adapters::ensure`]. Compiled code is cached in `cache_dir`, keyed by
    /// component digest and engine.
    pub fn load(limits: &PluginLimits, cache_dir: &Path, files: &[(String, &Path)]) -> anyhow::Result<Self> {
        let engine = PluginEngine::new(limits)?;
        std::fs::create_dir_all(cache_dir)
            .with_context(|| format!("cannot create cache dir {}", cache_dir.display()))?;
        let mut by_name = HashMap::new();
        for (name, path) in files {
            let bytes =
                std::fs::read(path).with_context(|| format!("adapter '{name}': cannot read {}", path.display()))?;
            let adapter = LoadedAdapter::load(&engine, name, &bytes, cache_dir)
                .with_context(|| format!("adapter '{name}' from {}", path.display()))?;
            by_name.insert(name.clone(), Arc::new(adapter));
        }
        Ok(Self {
            by_name: ArcSwap::from_pointee(by_name),
            engine,
            cache_dir: cache_dir.to_path_buf(),
        })
    }

    /// The adapter loaded as `name`, if any (a built-in only once ensured).
    pub fn get(&self, name: &str) -> Option<Arc<LoadedAdapter>> {
        self.by_name.load().get(name).cloned()
    }

    /// Whether `name` is loaded or built in (so [`Adapters::ensure`] finds it).
    pub fn knows(&self, name: &str) -> bool {
        self.get(name).is_some() || builtin::BUILTIN_ADAPTERS.iter().any(|b| b.name == name)
    }

    /// The adapter `name`, compiling it first if it is a built-in not loaded
    /// yet. `None`: neither loaded nor built in. Blocking on first use of a
    /// built-in: call it off the async workers.
    pub fn ensure(&self, name: &str) -> anyhow::Result<Option<Arc<LoadedAdapter>>> {
        if let Some(loaded) = self.get(name) {
            return Ok(Some(loaded));
        }
        let Some(builtin) = builtin::BUILTIN_ADAPTERS.iter().find(|b| b.name == name) else {
            return Ok(None);
        };
        let adapter = self
            .add(name, builtin.bytes)
            .with_context(|| format!("built-in adapter '{name}'"))?;
        Ok(Some(adapter))
    }

    /// Compiles (or takes from the cache) `bytes` and makes it available as
    /// `name` for new lookups. A name already loaded is kept as it is: names of
    /// registry installs carry their version, and versions are immutable.
    /// Blocking (compiling takes a while): call it off the async workers.
    pub fn add(&self, name: &str, bytes: &[u8]) -> anyhow::Result<Arc<LoadedAdapter>> {
        if let Some(loaded) = self.get(name) {
            return Ok(loaded);
        }
        let adapter = Arc::new(LoadedAdapter::load(&self.engine, name, bytes, &self.cache_dir)?);
        self.by_name.rcu(|current| {
            let mut next = HashMap::clone(current);
            next.entry(name.to_string()).or_insert_with(|| adapter.clone());
            next
        });
        Ok(self.get(name).expect("just added"))
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginLimits {
    /// Linear-memory cap per adapter instance.
    pub memory_mib: usize,
    /// CPU time one adapter call may take before it is interrupted.
    pub call_timeout_ms: u64,
    /// Adapter instances alive at once (one per in-flight request or stream).
    pub max_instances: u32,
    /// Per pool slot, up to this much of the memory an ended instance wrote is
    /// reset in place (copied back from the component's initial image) and
    /// stays resident for the next instance of the same component, instead of
    /// being handed back to the kernel and faulted in again page by page.
    /// Only where Linux's `PAGEMAP_SCAN` (6.7+) finds the written pages;
    /// elsewhere every slot is handed back whole. 0 turns it off.
    pub resident_kib: usize,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            memory_mib: 64,
            call_timeout_ms: 200,
            max_instances: 1_000,
            resident_kib: 1_024,
        }
    }
}

/// The test-only adapter that traps, loops or eats memory on request
/// (`tests/plugins/misbehaving`), built beside the built-in ones. For the
/// gateway's own sandbox tests; never loaded unless a config names it.
#[doc(hidden)]
pub const MISBEHAVING_TEST_COMPONENT: &str = env!("TG_TEST_MISBEHAVING_WASM");

/// The test-only tool server that loops, eats memory, answers too much or
/// fetches off its origins (`tests/plugins/hostile-tool`), for the component
/// sandbox tests.
#[doc(hidden)]
pub const HOSTILE_TOOL_TEST_COMPONENT: &str = env!("TG_TEST_HOSTILE_TOOL_WASM");

/// The test-only guardrail that traps, loops, eats memory, reaches for the
/// network or a secret, and rewrites beyond its hook
/// (`tests/plugins/hostile-guardrail`), for the guardrail sandbox tests.
#[doc(hidden)]
pub const HOSTILE_GUARDRAIL_TEST_COMPONENT: &str = env!("TG_TEST_HOSTILE_GUARDRAIL_WASM");

/// The test-only tool server on tool WIT 0.3.0 (`tests/plugins/mcp-tool`,
/// the MCP conformance fixture): images, audio, embedded resources,
/// progress, prompts, resources, completion and elicitation, for the MCP tests.
#[doc(hidden)]
pub const MCP_TOOL_TEST_COMPONENT: &str = env!("TG_TEST_MCP_TOOL_WASM");

/// The test-only tool server on tool WIT 0.2.0 (`tests/plugins/mcp-tool-v2`):
/// one tool, prompt and resource, so 0.2.0's path stays under test.
#[doc(hidden)]
pub const MCP_TOOL_V2_TEST_COMPONENT: &str = env!("TG_TEST_MCP_TOOL_V2_WASM");

/// The test-only tool server on tool WIT 0.4.0 (`tests/plugins/sampling-tool`)
/// that asks a model through the host, or keeps asking, for the tests of a
/// tool's model calls.
#[doc(hidden)]
pub const SAMPLING_TOOL_TEST_COMPONENT: &str = env!("TG_TEST_SAMPLING_TOOL_WASM");

/// The test-only skill that calls the tool its input names
/// (`tests/plugins/tool-caller`), for the `tools` capability tests.
#[doc(hidden)]
pub const TOOL_CALLER_TEST_COMPONENT: &str = env!("TG_TEST_TOOL_CALLER_WASM");

#[cfg(test)]
mod tests {
    use super::*;

    /// A translated, unstreamed call to model `m` at an address nothing
    /// listens on (these tests never send it).
    fn plain_context() -> CallContext {
        CallContext {
            request_id: "r".into(),
            upstream_model: "m".into(),
            base_url: "http://127.0.0.1:1".into(),
            stream: false,
            attempt: 0,
            max_output_tokens: None,
            continuation: None,
        }
    }

    /// Built-ins on every WIT version load side by side: the anthropic
    /// adapter (0.2.0) takes `anthropic-messages` natively; the
    /// OpenAI-compatible one (0.3.0) serves every operation besides chat and
    /// no dialect; a 0.1.0 adapter (OpenAI's Responses one) takes nothing
    /// natively and serves chat only.
    #[test]
    fn adapters_on_every_wit_version_load() {
        let cache = tempfile::tempdir().unwrap();
        let misbehaving = Path::new(MISBEHAVING_TEST_COMPONENT);
        let adapters = Adapters::load(
            &PluginLimits::default(),
            cache.path(),
            &[("misbehaving".to_string(), misbehaving)],
        )
        .unwrap();
        // Built-ins compile when a route first names them.
        assert!(adapters.get("anthropic").is_none());
        assert!(adapters.ensure("no-such-adapter").unwrap().is_none());
        let anthropic = adapters.ensure("anthropic").unwrap().unwrap();
        assert!(Arc::ptr_eq(&anthropic, &adapters.get("anthropic").unwrap()));
        assert!(adapters.get("openai-compatible").is_none());
        adapters.ensure("openai-compatible").unwrap();
        assert_eq!(anthropic.wit_version(), "0.2.0");
        assert_eq!(anthropic.native_dialects(), ["anthropic-messages"]);
        assert!(anthropic.operations().is_empty());
        let compatible = adapters.get("openai-compatible").unwrap();
        assert_eq!(compatible.wit_version(), "0.3.0");
        assert_eq!(compatible.operations().len(), 8);
        let embeddings = OperationBody::Json(br#"{"model":"x","input":"hi"}"#.to_vec());
        let mut session = compatible
            .open_operation(&plain_context(), Operation::Embeddings, &embeddings)
            .unwrap();
        let request = session.request().unwrap();
        assert!(request.url.ends_with("/embeddings"), "{}", request.url);
        // The test adapter loaded from a file is 0.3.0 too; OpenAI's
        // Responses adapter is 0.1.0: it serves chat only.
        assert_eq!(adapters.get("misbehaving").unwrap().wit_version(), "0.3.0");
        let responses = adapters.ensure("openai-responses").unwrap().unwrap();
        assert_eq!(responses.wit_version(), "0.1.0");
        assert!(responses.operations().is_empty());
        assert!(
            responses
                .open_operation(&plain_context(), Operation::Embeddings, &embeddings)
                .is_err()
        );
        for name in ["openai-compatible", "misbehaving", "openai-responses"] {
            let adapter = adapters.get(name).unwrap();
            assert!(adapter.native_dialects().is_empty(), "{name}");
            let ctx = plain_context();
            assert!(
                adapter.open_native(&ctx, "anthropic-messages", b"{}").is_err(),
                "{name}"
            );
            assert!(adapter.open(&ctx, b"{\"messages\":[]}").is_ok(), "{name}");
        }

        let ctx = CallContext {
            request_id: "r".into(),
            upstream_model: "claude-x".into(),
            base_url: "https://api.anthropic.com".into(),
            stream: false,
            attempt: 0,
            max_output_tokens: Some(64),
            continuation: None,
        };
        let body = br#"{"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024},"models":["x"]}"#;
        let mut session = anthropic.open_native(&ctx, "anthropic-messages", body).unwrap();
        assert!(session.is_native());
        let request = session.request().unwrap();
        assert!(matches!(&request.auth, AuthSlot::Header(name) if name == "x-api-key"));
        // The plugin host has no JSON parser; the adapter writes keys sorted.
        let sent = String::from_utf8(request.body).unwrap();
        assert!(
            sent.contains(r#""thinking":{"budget_tokens":1024,"type":"enabled"}"#),
            "{sent}"
        );
        assert!(
            sent.contains(r#""model":"claude-x""#) && sent.contains(r#""max_tokens":64"#),
            "{sent}"
        );
        let translated = anthropic
            .open(&ctx, br#"{"messages":[{"role":"user","content":"hi"}]}"#)
            .unwrap();
        assert!(!translated.is_native());
    }

    /// The warmer runs in the idle scheduling class: on a machine busy with
    /// other tests it may wait a while for a core.
    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A used adapter has an instance ready for its next request, made off
    /// the request's thread; the request takes it, and its replacement is
    /// made in turn. A ready instance holds no ticker guard, so an idle
    /// gateway's ticker still sleeps; and a request still gets an instance
    /// of its own, fresh to the exchange.
    #[test]
    fn each_request_takes_a_ready_instance_and_a_replacement_follows() {
        let cache = tempfile::tempdir().unwrap();
        let adapters = Adapters::load(&PluginLimits::default(), cache.path(), &[]).unwrap();
        let adapter = adapters.ensure("openai-compatible").unwrap().unwrap();
        assert_eq!(adapter.ready_instances(), 0, "nothing is made before first use");
        let ctx = plain_context();
        let body = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
        let first = adapter.open(&ctx, body).unwrap();
        assert_eq!(adapter.instantiated_inline(), 1, "the first request found none ready");
        wait_until("one instance is ready", || adapter.ready_instances() == 1);
        let mut second = adapter.open(&ctx, body).unwrap();
        assert_eq!(
            adapter.instantiated_inline(),
            1,
            "the second request took the ready one"
        );
        wait_until("its replacement is ready", || adapter.ready_instances() == 1);
        assert!(second.request().unwrap().body.starts_with(b"{"));
        drop((first, second));

        let ticker = adapters.engine().ticker();
        std::thread::sleep(crate::EPOCH_TICK * 80);
        let before = ticker.ticks();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(ticker.ticks(), before, "a ready instance lets the ticker sleep");
        assert_eq!(adapter.ready_instances(), 1);
    }
}
