//! The one wasmtime engine shared by all adapters: pooling allocator (instances
//! come from pre-reserved slots, and what an ended instance wrote stays resident,
//! reset by copy, for the slot's next one; so a fresh instance per request is
//! cheap), epoch interruption driven by a 5 ms ticker that runs while any store
//! exists (so a looping guest is stopped; `ticker.rs`), and no component-model
//! concurrency (adapter calls are short and synchronous).

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::PluginLimits;
use crate::ticker::Ticker;
use crate::warm::Warmer;

/// Linear memories and tables whose instances ended are handed back to the
/// kernel this many at a time. Each decommit is an `madvise` that flushes the
/// TLB of every core running the gateway (an inter-processor interrupt); one
/// instance per request made that about 9 % of a busy gateway's CPU time.
/// Batched, wasmtime hands them back in one `process_madvise` call (Linux
/// 5.10+; one call each elsewhere). At most `cores × (batch − 1)` slots wait
/// for reuse meanwhile, far below `max_instances`.
const DECOMMIT_BATCH: usize = 16;

/// Instances each used adapter keeps ready (`warm.rs`): one for the next
/// request, one for a request that comes while the first is replaced.
const KEEP_READY: usize = 2;

pub struct PluginEngine {
    pub(crate) engine: Engine,
    /// Linear-memory cap per instance, in bytes.
    pub(crate) memory_cap: usize,
    pub(crate) call_timeout_ms: u64,
    pub(crate) ticker: Ticker,
    pub(crate) warmer: Warmer,
    /// Ready instances per adapter; none when the pool is too small to
    /// spare the slots.
    pub(crate) keep_ready: usize,
    max_instances: u32,
}

impl PluginEngine {
    /// The wasmtime engine, for hosts of other component kinds.
    pub fn wasmtime(&self) -> &Engine {
        &self.engine
    }

    /// The epoch ticker: every store holds [`Ticker::awake`] for its life.
    pub fn ticker(&self) -> &Ticker {
        &self.ticker
    }

    /// The thread that drops used stores off the request path.
    pub fn warmer(&self) -> &Warmer {
        &self.warmer
    }

    /// Linear-memory cap per instance, in bytes (the pool's slot size).
    pub fn memory_cap(&self) -> usize {
        self.memory_cap
    }

    /// Instances each used adapter keeps ready; 0 when the pool is too small.
    pub fn keep_ready(&self) -> usize {
        self.keep_ready
    }

    /// The pool's component instances (`plugins.max_instances`).
    pub fn max_instances(&self) -> u32 {
        self.max_instances
    }

    pub fn new(limits: &PluginLimits) -> anyhow::Result<Self> {
        anyhow::ensure!(limits.memory_mib >= 1, "plugins.memory_mib must be at least 1");
        anyhow::ensure!(limits.max_instances >= 1, "plugins.max_instances must be at least 1");
        let memory_cap = limits.memory_mib << 20;
        let instances = limits.max_instances;

        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(instances)
            .total_core_instances(instances.saturating_mul(4))
            .total_memories(instances.saturating_mul(2))
            .total_tables(instances.saturating_mul(4))
            .max_memory_size(memory_cap)
            .decommit_batch_size(DECOMMIT_BATCH);
        // Keep what an ended instance wrote resident, reset by copy, only where
        // the kernel can tell which pages were written: without `PAGEMAP_SCAN`
        // wasmtime would reset (and keep) the lowest `resident` bytes of every
        // slot whether touched or not, and a Rust guest's 1 MiB stack sits there.
        let resident = match PoolingAllocationConfig::is_pagemap_scan_available() {
            true => limits.resident_kib.saturating_mul(1024).min(memory_cap),
            false => 0,
        };
        if resident > 0 {
            pool.pagemap_scan(Enabled::Yes)
                .linear_memory_keep_resident(resident)
                .table_keep_resident(resident);
        }

        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .concurrency_support(false)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let ticker = Ticker::start(&engine);
        Ok(Self {
            engine,
            ticker,
            warmer: Warmer::start(),
            keep_ready: KEEP_READY.min(instances as usize / 32),
            max_instances: instances,
            memory_cap,
            call_timeout_ms: limits.call_timeout_ms,
        })
    }
}
