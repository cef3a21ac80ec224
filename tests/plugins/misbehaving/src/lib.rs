//! Test-only adapter: behaves like the OpenAI-compatible adapter, except when
//! `ctx.upstream_model` asks it to misbehave:
//!
//! - `trap`: panics in `request()` (the plugin profile aborts on panic, so the
//!   component traps);
//! - `loop`: spins forever in `request()`;
//! - `oom`: in `request()`, allocates and touches 1 MiB blocks forever, never
//!   freeing them, until the host's memory limit stops it;
//! - `trap-stream`: normal `request()`, panics in `on_events()`.
//!
//! The OpenAI-compatible adapter is compiled in from its source file rather
//! than linked as a library: that crate exports its own component, and two
//! `export_adapter!` calls in one component clash at link time ("symbol
//! multiply defined").

use core::hint::black_box;

#[allow(dead_code)]
#[path = "../../../../plugins/openai-compatible/src/adapter.rs"]
mod openai_compatible;

use openai_compatible::OpenAiCompatible;
use tollgate_plugin_sdk::{Adapter, AdapterError, CallContext, Event, OutboundRequest, ResponseHead, Usage};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    Trap,
    Loop,
    Oom,
    TrapStream,
}

impl Mode {
    fn from_model(model: &str) -> Self {
        match model {
            "trap" => Mode::Trap,
            "loop" => Mode::Loop,
            "oom" => Mode::Oom,
            "trap-stream" => Mode::TrapStream,
            _ => Mode::Normal,
        }
    }
}

pub struct Misbehaving {
    mode: Mode,
    inner: OpenAiCompatible,
}

fn spin_forever() -> ! {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn exhaust_memory() -> ! {
    const BLOCK: usize = 1 << 20;
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    loop {
        // Filled with a non-zero byte, so every page is written (no lazily
        // zeroed allocation shortcut).
        let block = vec![black_box(1u8); BLOCK];
        blocks.push(black_box(block));
        black_box(&blocks);
    }
}

impl Adapter for Misbehaving {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        Misbehaving {
            mode: Mode::from_model(&ctx.upstream_model),
            inner: OpenAiCompatible::new(ctx, openai_body),
        }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        match self.mode {
            Mode::Trap => panic!("misbehaving adapter: trap requested"),
            Mode::Loop => spin_forever(),
            Mode::Oom => exhaust_memory(),
            Mode::Normal | Mode::TrapStream => self.inner.request(),
        }
    }

    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        self.inner.response(head, body)
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        if self.mode == Mode::TrapStream {
            panic!("misbehaving adapter: trap-stream requested");
        }
        self.inner.on_events(events)
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.inner.finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.inner.usage()
    }

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        self.inner.classify_error(head, body)
    }
}

tollgate_plugin_sdk::export_adapter!(Misbehaving);
