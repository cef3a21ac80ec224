//! Test-only adapter: behaves like the OpenAI-compatible adapter, except when
//! `ctx.upstream_model` asks it to misbehave:
//!
//! - `trap`: panics in `request()` (the plugin profile aborts on panic, so the
//!   component traps);
//! - `loop`: spins forever in `request()`;
//! - `oom`: in `request()`, allocates and touches 1 MiB blocks forever, never
//!   freeing them, until the host's memory limit stops it;
//! - `trap-stream`: normal `request()`, panics in `on_events()`;
//! - `scavenge`: normal `request()`; `response()` reads the instance's whole
//!   linear memory for `TENANT-SECRET-<token>` markers, which an earlier
//!   request (another tenant's) may have left behind, and answers with the
//!   tokens it found as the message content.
//!
//! It exports WIT 0.3.0 and serves the operations besides chat as the
//! OpenAI-compatible adapter does, with the same modes: `request()`
//! misbehaves for an operation as for chat, so the sandbox's limits are
//! shown on that lane too.
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
use tollgate_plugin_sdk::{
    Adapter, AdapterError, CallContext, Event, Measured, Operation, OperationAnswer, OperationBody, OutboundRequest,
    ResponseHead, Usage,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    Trap,
    Loop,
    Oom,
    TrapStream,
    Scavenge,
}

impl Mode {
    fn from_model(model: &str) -> Self {
        match model {
            "trap" => Mode::Trap,
            "loop" => Mode::Loop,
            "oom" => Mode::Oom,
            "trap-stream" => Mode::TrapStream,
            "scavenge" => Mode::Scavenge,
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

/// Every `TENANT-SECRET-<token>` in this instance's linear memory, as
/// `token;token;…` (each token once). The marker is built at run time and
/// the buffers of the scan itself are skipped, so only what requests put in
/// memory is found.
#[cfg(target_arch = "wasm32")]
fn scavenge() -> String {
    const TOKEN_MAX: usize = 32;
    let marker: Vec<u8> = b"-TERCES-TNANET".iter().rev().copied().collect();
    let mut found = String::with_capacity(4096);
    let own = [
        (marker.as_ptr() as usize, marker.len()),
        (found.as_ptr() as usize, found.capacity()),
    ];
    let size = core::arch::wasm32::memory_size(0) * 65536;
    // SAFETY: every address below the memory's size is readable in wasm.
    let byte = |addr: usize| unsafe { core::ptr::read_volatile(addr as *const u8) };
    let mut addr = 1;
    while addr + marker.len() + TOKEN_MAX < size {
        let is_own = own.iter().any(|&(start, len)| addr >= start && addr < start + len);
        if !is_own && (0..marker.len()).all(|i| byte(addr + i) == marker[i]) {
            let start = addr + marker.len();
            let mut token = [0u8; TOKEN_MAX];
            let mut len = 0;
            while len < TOKEN_MAX && matches!(byte(start + len), b'a'..=b'z' | b'0'..=b'9' | b'-') {
                token[len] = byte(start + len);
                len += 1;
            }
            let token = core::str::from_utf8(&token[..len]).unwrap_or("");
            // No reallocation: the buffer's address is in `own`.
            if !token.is_empty()
                && !found.split(';').any(|t| t == token)
                && found.len() + token.len() + 1 < found.capacity()
            {
                found.push_str(token);
                found.push(';');
            }
            addr = start;
        } else {
            addr += 1;
        }
    }
    found
}

#[cfg(not(target_arch = "wasm32"))]
fn scavenge() -> String {
    String::new()
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
            Mode::Normal | Mode::TrapStream | Mode::Scavenge => self.inner.request(),
        }
    }

    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let answer = self.inner.response(head, body)?;
        if self.mode != Mode::Scavenge {
            return Ok(answer);
        }
        let found = scavenge();
        let mut answer: serde_json::Value = serde_json::from_slice(&answer).expect("the inner adapter answers JSON");
        answer["choices"][0]["message"]["content"] = found.into();
        Ok(serde_json::to_vec(&answer).expect("JSON"))
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

    fn operations() -> Vec<Operation> {
        OpenAiCompatible::operations()
    }

    fn new_operation(ctx: CallContext, operation: Operation, body: OperationBody) -> Result<Self, AdapterError> {
        Ok(Misbehaving {
            mode: Mode::from_model(&ctx.upstream_model),
            inner: OpenAiCompatible::new_operation(ctx, operation, body)?,
        })
    }

    fn operation_response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<OperationAnswer, AdapterError> {
        self.inner.operation_response(head, body)
    }

    fn measured(&self) -> Option<Measured> {
        self.inner.measured()
    }
}

tollgate_plugin_sdk::export_adapter!(Misbehaving);
