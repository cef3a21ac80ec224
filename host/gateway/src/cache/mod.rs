//! The response cache: answers kept in memory per gateway and served again
//! to the same workspace for the same request, exactly (`exact`) or for a
//! request whose texts mean nearly the same (`semantic`: embeddings through
//! the gateway's own metered pipeline, cosine similarity above a threshold).
//!
//! A key is the SHA-256 of the workspace and the request as parsed, written
//! back with its keys sorted (after request guardrails rewrote it), so two
//! workspaces never share an entry and key order or spacing never matters. What is
//! kept is the answer as the provider gave it, before answer guardrails: a
//! hit goes through them again, so a redaction's originals are restored
//! from the new request's own memo. A hit is billed as its own request kind
//! (`cache_hit`) at `cache.hit_price_usd` plus the plan's fee.

pub mod semantic;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tollgate_core::money::Nanos;
use tollgate_plugin_host::Usage;
use tollgate_routing::catalog::ModelRoute;

/// `[cache]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Serve repeated requests from memory. Off by default: a cached answer
    /// is the same answer, which a caller sampling with temperature may not want.
    pub enabled: bool,
    /// How long an entry is served.
    pub ttl_secs: u64,
    /// Memory the entries may take, in MiB (the oldest go first).
    pub max_mib: u64,
    /// Largest answer kept, in KiB.
    pub max_entry_kib: u64,
    /// What a hit costs the caller, in USD, before the plan's fee.
    pub hit_price_usd: String,
    /// Semantic matching: on when `model` is set.
    pub semantic: semantic::SemanticConfig,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: false,
            ttl_secs: 300,
            max_mib: 64,
            max_entry_kib: 1024,
            hit_price_usd: "0".into(),
            semantic: semantic::SemanticConfig::default(),
        }
    }
}

impl CacheConfig {
    pub fn check(&self) -> anyhow::Result<()> {
        Nanos::from_usd(&self.hit_price_usd).map_err(|e| anyhow::anyhow!("cache.hit_price_usd: {e}"))?;
        anyhow::ensure!(self.ttl_secs >= 1, "cache.ttl_secs must be at least 1");
        self.semantic.check()
    }
}

/// A kept answer.
pub enum Kept {
    /// A whole answer object as JSON, without the `service` block its first
    /// caller was shown.
    Whole(Bytes),
    /// A stream's chunks and its closing chunk, replayed as a stream.
    Stream {
        chunks: Vec<Bytes>,
        closing: Map<String, Value>,
    },
}

pub struct Entry {
    pub kept: Kept,
    /// The model that answered, shown again on a hit.
    pub route: Arc<ModelRoute>,
    /// The counts the first answer was billed for (shown, not billed again).
    pub usage: Option<Usage>,
    pub stored: Instant,
    /// Bytes it takes, for the memory bound.
    pub bytes: usize,
}

/// A key: the workspace and the canonical request.
pub type Key = [u8; 32];

#[derive(Clone)]
struct Weigh;

impl quick_cache::Weighter<Key, Arc<Entry>> for Weigh {
    fn weight(&self, _key: &Key, entry: &Arc<Entry>) -> u64 {
        entry.bytes as u64 + 64
    }
}

/// The cache's state: the exact entries, the semantic index, the settings.
pub struct ResponseCache {
    config: CacheConfig,
    hit_price: Nanos,
    entries: quick_cache::sync::Cache<Key, Arc<Entry>, Weigh>,
    pub semantic: semantic::Index,
}

impl ResponseCache {
    /// The cache `config` describes (checked when the configuration loaded;
    /// a price that does not parse is taken as zero).
    pub fn new(config: CacheConfig) -> Self {
        let bytes = config.max_mib.max(1) << 20;
        ResponseCache {
            hit_price: Nanos::from_usd(&config.hit_price_usd).unwrap_or(Nanos::ZERO),
            // Entries are a few KiB: the estimate only sizes the shards.
            entries: quick_cache::sync::Cache::with_weighter((bytes / 4096) as usize + 16, bytes, Weigh),
            semantic: semantic::Index::new(&config.semantic),
            config,
        }
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    pub fn hit_price(&self) -> Nanos {
        self.hit_price
    }

    pub fn semantic_config(&self) -> &semantic::SemanticConfig {
        &self.config.semantic
    }

    /// A fresh entry under `key`; an expired one is dropped.
    pub fn get(&self, key: &Key) -> Option<Arc<Entry>> {
        let entry = self.entries.get(key)?;
        if entry.stored.elapsed() > self.ttl() {
            self.entries.remove(key);
            return None;
        }
        Some(entry)
    }

    /// Keeps an answer, unless it is larger than an entry may be.
    pub fn put(&self, key: Key, entry: Entry) -> bool {
        if entry.bytes as u64 > self.config.max_entry_kib << 10 {
            return false;
        }
        self.entries.insert(key, Arc::new(entry));
        true
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.config.ttl_secs)
    }
}

/// The exact key of a request: its workspace and the request as a parsed
/// value writes it, streamed into the hash. A parsed object's keys are
/// sorted already (serde_json's map is ordered), so this is a canonical form
/// of the request without RFC 8785's per-object re-sorting, which buffered
/// every member and cost a request about 4 µs. (Numbers keep the form they
/// were sent in: `1` and `1.0` are different requests here.)
pub fn exact_key(workspace: &str, request: &Value) -> Option<Key> {
    let mut hash = HashWriter(Sha256::new());
    hash.0.update(b"tollgate.cache.v2\0");
    hash.0.update(workspace.as_bytes());
    hash.0.update([0]);
    serde_json::to_writer(&mut hash, request).ok()?;
    Some(hash.0.finalize().into())
}

/// Feeds what is written into the hash.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The request without its texts: two requests whose shapes match (model,
/// parameters, roles, tools) may share a semantically close answer.
pub fn shape_key(workspace: &str, request: &Value) -> Option<Key> {
    let mut shape = request.clone();
    if let Some(Value::Array(messages)) = shape.get_mut("messages") {
        for message in messages {
            match message.get_mut("content") {
                Some(Value::String(text)) => text.clear(),
                Some(Value::Array(parts)) => {
                    for part in parts {
                        if let Some(Value::String(text)) = part.get_mut("text") {
                            text.clear();
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut hash = Sha256::new();
    hash.update(b"tollgate.cache.shape.v1\0");
    hash.update(exact_key(workspace, &shape)?);
    Some(hash.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_ignore_key_order_and_separate_workspaces() {
        let a = json!({"model": "a/b", "messages": [{"role": "user", "content": "hi"}], "temperature": 0});
        let b: Value =
            serde_json::from_str(r#"{"temperature":0,"messages":[{"content":"hi","role":"user"}],"model":"a/b"}"#)
                .unwrap();
        assert_eq!(exact_key("ws1", &a), exact_key("ws1", &b));
        assert_ne!(exact_key("ws1", &a), exact_key("ws2", &a));
        let c = json!({"model": "a/b", "messages": [{"role": "user", "content": "hello"}], "temperature": 0});
        assert_ne!(exact_key("ws1", &a), exact_key("ws1", &c));
        assert_eq!(shape_key("ws1", &a), shape_key("ws1", &c));
    }
}
