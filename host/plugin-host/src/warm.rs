//! Instances made ready off the request path. Instantiating an adapter in a
//! fresh store costs tens of microseconds, which a request at c=1 used to
//! wait for. Each adapter keeps a few instances ready; a request takes one
//! and asks the warmer thread for its replacement, which is made while the
//! request runs (on another core when there is one).
//!
//! An instance is still used by exactly one request and dropped after it: a
//! ready instance has run nothing but its component's start code, as a fresh
//! one would have.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

/// Something that can make one more ready instance of itself.
pub(crate) trait Refill: Send + Sync {
    fn refill(&self);
}

/// A handle on the warmer thread; clones share it. The thread ends once
/// every handle is gone.
#[derive(Clone)]
pub(crate) struct Warmer(Sender<Arc<dyn Refill>>);

impl Warmer {
    pub(crate) fn start() -> Self {
        let (sender, receiver) = channel();
        std::thread::Builder::new()
            .name("wasm-warmer".into())
            .spawn(move || run(receiver))
            .expect("cannot start the wasm warmer thread");
        Self(sender)
    }

    /// Asks for one more ready instance of `what`. Never blocks.
    pub(crate) fn request(&self, what: Arc<dyn Refill>) {
        // The thread is gone only while the process shuts down.
        let _ = self.0.send(what);
    }
}

fn run(requests: Receiver<Arc<dyn Refill>>) {
    for what in requests {
        what.refill();
    }
}
