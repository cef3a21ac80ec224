//! Instance work done off the request path. Instantiating an adapter in a
//! fresh store costs tens of microseconds, and dropping a used one a few more,
//! which a request at c=1 used to wait for. Each adapter keeps a few
//! instances ready; a request takes one and asks the warmer thread for its
//! replacement, and hands its used store to the same thread to drop. Both
//! happen while the request runs or after it answered, on another core when
//! there is one.
//!
//! An instance is still used by exactly one request and dropped after it: a
//! ready instance has run nothing but its component's start code, as a fresh
//! one would have.
//!
//! The queue is bounded. When the warmer falls behind (a saturated host), a
//! request drops its store itself and no replacement is asked for, so the
//! next request instantiates its own: the work is never lost or piled up,
//! only done inline as before.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Jobs waiting at most: a few per core is plenty when the thread keeps up.
const QUEUE: usize = 64;

/// Something that can make one more ready instance of itself: an adapter,
/// or a guardrail of the component host.
pub trait Refill: Send + Sync {
    fn refill(&self);
}

enum Job {
    Refill(Arc<dyn Refill>),
    Discard(Box<dyn Send>),
}

/// A handle on the warmer thread; clones share it. The thread ends once
/// every handle is gone.
#[derive(Clone)]
pub struct Warmer(SyncSender<Job>);

impl Warmer {
    pub(crate) fn start() -> Self {
        let (sender, receiver) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("wasm-warmer".into())
            .spawn(move || {
                run_only_when_idle();
                run(receiver)
            })
            .expect("cannot start the wasm warmer thread");
        Self(sender)
    }

    /// Asks for one more ready instance of `what`; false when the warmer is
    /// behind and will not make it. Never blocks.
    pub fn refill(&self, what: Arc<dyn Refill>) -> bool {
        self.0.try_send(Job::Refill(what)).is_ok()
    }

    /// Drops `used` on the warmer thread, or here when the warmer is behind.
    pub fn discard(&self, used: Box<dyn Send>) {
        match self.0.try_send(Job::Discard(used)) {
            Ok(()) => {}
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => drop(job),
        }
    }
}

/// Puts the calling thread in the idle scheduling class. Woken at normal
/// priority, the warmer preempted the very request that woke it (seen with
/// `perf` at c=1 on two cores: 0.8 preemptions per request), which put the
/// instantiation back on the request's path. In the idle class it only takes
/// a core nothing else wants; when there is none, its queue fills and
/// requests do the work inline, as they did before it existed.
fn run_only_when_idle() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` for the call's duration;
        // pid 0 is the calling thread.
        let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if result != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "the wasm warmer keeps normal priority"
            );
        }
    }
}

fn run(jobs: Receiver<Job>) {
    for job in jobs {
        match job {
            Job::Refill(what) => what.refill(),
            Job::Discard(used) => drop(used),
        }
    }
}
