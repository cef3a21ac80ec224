//! The epoch ticker: advances the engine's epoch every [`EPOCH_TICK`] while
//! any guest store exists, so a looping guest is stopped, and sleeps when the
//! host has been idle for a while, so an idle gateway is not woken 200 times
//! a second for nothing.
//!
//! Every store holds an [`Awake`] guard for its life (an adapter session, a
//! tool call, a skill run). Creating one is an atomic add, plus a wakeup only
//! when the ticker is asleep: under load the ticker never sleeps, so the
//! request path pays no syscall for it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use wasmtime::Engine;

/// Deadline resolution. Coarse on purpose: every tick wakes a thread, and on a
/// small machine 1 ms wakeups measurably compete with request handling, while
/// a call limit only needs to be enforced to within a few milliseconds.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Ticks with no store before the ticker sleeps: long enough that the gaps
/// between requests under light load do not make it sleep and wake each time.
const IDLE_TICKS_BEFORE_SLEEP: u32 = 40;

/// While asleep the ticker still looks every so often whether its engine is
/// gone, so the thread ends with it.
const ASLEEP_RECHECK: Duration = Duration::from_secs(1);

/// A handle on the engine's ticker; clones share it.
#[derive(Clone)]
pub struct Ticker(Arc<Shared>);

#[derive(Default)]
struct Shared {
    /// Stores alive now.
    stores: AtomicUsize,
    asleep: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// Epochs advanced so far (for tests and diagnostics).
    ticks: AtomicU64,
}

/// Keeps the ticker running while held.
pub struct Awake(Arc<Shared>);

impl Drop for Awake {
    fn drop(&mut self) {
        self.0.stores.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ticker {
    /// Starts the ticker thread for `engine`. The thread holds only a weak
    /// handle, so it never keeps the engine alive, and ends after it.
    pub(crate) fn start(engine: &Engine) -> Self {
        let shared = Arc::new(Shared::default());
        let ticker = shared.clone();
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                let mut idle_ticks = 0;
                while let Some(engine) = weak.upgrade() {
                    if idle_ticks >= IDLE_TICKS_BEFORE_SLEEP {
                        drop(engine);
                        if ticker.sleep_while_idle() {
                            idle_ticks = 0;
                        }
                        continue;
                    }
                    engine.increment_epoch();
                    drop(engine);
                    ticker.ticks.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(EPOCH_TICK);
                    match ticker.stores.load(Ordering::SeqCst) {
                        0 => idle_ticks += 1,
                        _ => idle_ticks = 0,
                    }
                }
            })
            .expect("cannot start the epoch ticker thread");
        Self(shared)
    }

    /// Marks a store alive until the guard drops, waking the ticker if it
    /// sleeps.
    pub fn awake(&self) -> Awake {
        self.0.stores.fetch_add(1, Ordering::SeqCst);
        // The ticker sets `asleep` before it checks `stores` (both SeqCst), so
        // either it sees this store or this sees it asleep and wakes it.
        if self.0.asleep.load(Ordering::SeqCst) {
            let _lock = self.0.lock.lock().expect("ticker lock");
            self.0.wake.notify_one();
        }
        Awake(self.0.clone())
    }

    /// Epochs advanced since the ticker started.
    pub fn ticks(&self) -> u64 {
        self.0.ticks.load(Ordering::Relaxed)
    }
}

impl Shared {
    /// Sleeps until a store exists (true) or [`ASLEEP_RECHECK`] passes
    /// (false: the caller checks that the engine still exists and sleeps on).
    fn sleep_while_idle(&self) -> bool {
        let lock = self.lock.lock().expect("ticker lock");
        self.asleep.store(true, Ordering::SeqCst);
        let (_lock, waited) = self
            .wake
            .wait_timeout_while(lock, ASLEEP_RECHECK, |_| self.stores.load(Ordering::SeqCst) == 0)
            .expect("ticker lock");
        self.asleep.store(false, Ordering::SeqCst);
        !waited.timed_out()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks_during(ticker: &Ticker, wait: Duration) -> u64 {
        let before = ticker.ticks();
        std::thread::sleep(wait);
        ticker.ticks() - before
    }

    #[test]
    fn the_ticker_sleeps_when_idle_and_wakes_for_a_store() {
        let engine = Engine::default();
        let ticker = Ticker::start(&engine);
        // Idle from the start: after IDLE_TICKS_BEFORE_SLEEP ticks it sleeps.
        std::thread::sleep(EPOCH_TICK * (IDLE_TICKS_BEFORE_SLEEP + 20));
        assert_eq!(
            ticks_during(&ticker, Duration::from_millis(300)),
            0,
            "an idle ticker sleeps"
        );

        let awake = ticker.awake();
        let ticked = ticks_during(&ticker, Duration::from_millis(300));
        assert!(ticked >= 20, "a store wakes the ticker: {ticked} ticks in 300 ms");
        // It keeps ticking for as long as a store lives, past the idle limit.
        std::thread::sleep(EPOCH_TICK * IDLE_TICKS_BEFORE_SLEEP);
        assert!(ticks_during(&ticker, Duration::from_millis(100)) > 0);

        drop(awake);
        std::thread::sleep(EPOCH_TICK * (IDLE_TICKS_BEFORE_SLEEP + 20));
        assert_eq!(
            ticks_during(&ticker, Duration::from_millis(300)),
            0,
            "asleep again once idle"
        );
    }
}
