//! The plugin host: one wasmtime engine, provider adapters compiled once and kept
//! as pre-linked `InstancePre`s, and a fresh sandboxed instance per request.
//!
//! Adapters are pure translators with no capabilities (every import they declare is
//! linked to a trap), so they cannot reach the network, the filesystem or secrets.

mod adapter;
mod cache;
mod engine;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

pub use adapter::{
    AdapterError, AdapterFault, AuthSlot, CallContext, ErrorClass, Event, ExchangeError, LoadedAdapter,
    OutboundRequest, ResponseHead, Session, Usage,
};
pub use engine::PluginEngine;

use crate::config::PluginLimits;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_adapters.rs"));
}

/// Loaded adapters by name. The engine lives as long as any adapter compiled
/// with it (each `InstancePre` holds it), and so does its epoch ticker.
pub struct Adapters {
    by_name: HashMap<String, Arc<LoadedAdapter>>,
}

impl Adapters {
    /// Loads the built-in adapters plus `files` (name → component path). Compiled
    /// code is cached in `cache_dir`, keyed by component digest and engine.
    pub fn load(limits: &PluginLimits, cache_dir: &Path, files: &[(String, &Path)]) -> anyhow::Result<Self> {
        let engine = PluginEngine::new(limits)?;
        std::fs::create_dir_all(cache_dir)
            .with_context(|| format!("cannot create cache dir {}", cache_dir.display()))?;
        let mut by_name = HashMap::new();
        for (name, bytes) in builtin::BUILTIN_ADAPTERS {
            let adapter = LoadedAdapter::load(&engine, name, bytes, cache_dir)
                .with_context(|| format!("built-in adapter '{name}'"))?;
            by_name.insert(name.to_string(), Arc::new(adapter));
        }
        for (name, path) in files {
            let bytes =
                std::fs::read(path).with_context(|| format!("adapter '{name}': cannot read {}", path.display()))?;
            let adapter = LoadedAdapter::load(&engine, name, &bytes, cache_dir)
                .with_context(|| format!("adapter '{name}' from {}", path.display()))?;
            by_name.insert(name.clone(), Arc::new(adapter));
        }
        Ok(Self { by_name })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<LoadedAdapter>> {
        self.by_name.get(name)
    }
}
