//! What a guest call has spent, in CPU time of the thread that runs it.
//!
//! Epoch ticks are wall time: a guest whose thread is descheduled (a loaded
//! machine, the warmer's idle-priority thread, another process compiling)
//! would be charged for time it never ran, and a healthy adapter failed with
//! a time-limit trap. The ticker only says *when to look*; the thread's CPU
//! clock says what the guest, and the host calls it made, actually used.
//! A wall-time backstop stays, so a guest can never run unbounded even if
//! the CPU clock misbehaved.
//!
//! The thread's CPU clock has no vDSO path: each read is a system call. So a
//! call's first read is at its first epoch tick, not at its start, and a
//! call that ends before a tick (almost every call) reads it not at all. The
//! CPU a call uses before its first tick, at most one tick's worth, is not
//! charged: the budget's resolution is one tick either way.

use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// CPU time the calling thread has used so far.
fn thread_cpu() -> Duration {
    // libc's, not rustix's: rustix's vDSO lookup faults under valgrind, and
    // callgrind is how the request path's instructions are counted.
    #[cfg(unix)]
    {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `now` is a valid timespec to write; the clock id is a constant.
        let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        debug_assert_eq!(status, 0, "the thread CPU clock is always there on unix");
        Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }
    // Elsewhere a monotonic clock stands in: wall time, the old behaviour.
    #[cfg(not(unix))]
    {
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }
}

/// How much a guest call has spent of its budget.
#[derive(Debug, Clone)]
pub struct GuestClock {
    budget: Duration,
    backstop: Duration,
    spent: Duration,
    started: Instant,
    /// The thread and its CPU clock when the guest was last charged; `None`
    /// from a call's start until its first tick.
    mark: Option<(ThreadId, Duration)>,
}

/// Why [`GuestClock::charge`] says stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// The guest used its CPU budget.
    Compute,
    /// The call has run `backstop` of wall time, whatever it used.
    WallTime,
}

impl GuestClock {
    /// A clock for calls of `budget` CPU each, cut at `backstop` of wall time.
    pub fn new(budget: Duration, backstop: Duration) -> Self {
        Self {
            budget,
            backstop,
            spent: Duration::ZERO,
            started: Instant::now(),
            mark: None,
        }
    }

    /// A new call begins: its budget is whole again. The CPU clock is first
    /// read at the call's first tick (see the module's note).
    pub fn restart(&mut self) {
        self.spent = Duration::ZERO;
        self.started = Instant::now();
        self.mark = None;
    }

    /// Charges the CPU used since the last mark (called from the epoch
    /// callback, so only while guest code runs). A call's first tick, and a
    /// store that moved to another thread since, are charged from here on.
    pub fn charge(&mut self) -> Result<(), Overrun> {
        let thread = std::thread::current().id();
        let now = thread_cpu();
        if let Some((marked, at)) = self.mark
            && marked == thread
        {
            self.spent += now.saturating_sub(at);
        }
        self.mark = Some((thread, now));
        if self.spent >= self.budget {
            return Err(Overrun::Compute);
        }
        if self.started.elapsed() >= self.backstop {
            return Err(Overrun::WallTime);
        }
        Ok(())
    }

    /// Moves the wall backstop `waited` later: the call spent that long
    /// waiting on something that is not its to bound (a person's answer).
    pub fn exclude(&mut self, waited: Duration) {
        self.started += waited;
    }

    /// CPU charged to the current call so far.
    pub fn spent(&self) -> Duration {
        self.spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(for_cpu: Duration) {
        let start = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - start < for_cpu {
            x = x.wrapping_add(1);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn sleeping_costs_nothing_and_spinning_is_charged() {
        let mut clock = GuestClock::new(Duration::from_millis(30), Duration::from_secs(60));
        clock.restart();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(clock.charge(), Ok(()), "descheduled time is not the guest's");
        assert!(clock.spent() < Duration::from_millis(10), "{:?}", clock.spent());
        spin(Duration::from_millis(35));
        assert_eq!(clock.charge(), Err(Overrun::Compute));
    }

    #[test]
    fn a_calls_cpu_is_charged_from_its_first_tick() {
        let mut clock = GuestClock::new(Duration::from_millis(20), Duration::from_secs(60));
        clock.restart();
        spin(Duration::from_millis(25));
        assert_eq!(clock.charge(), Ok(()), "before the first tick nothing is read");
        assert!(clock.spent().is_zero());
        spin(Duration::from_millis(25));
        assert_eq!(clock.charge(), Err(Overrun::Compute));
    }

    #[test]
    fn restart_gives_a_new_call_the_whole_budget() {
        let mut clock = GuestClock::new(Duration::from_millis(20), Duration::from_secs(60));
        clock.restart();
        clock.charge().unwrap(); // the first tick
        spin(Duration::from_millis(25));
        assert_eq!(clock.charge(), Err(Overrun::Compute));
        clock.restart();
        assert_eq!(clock.charge(), Ok(()));
    }

    #[test]
    fn excluded_waits_move_the_wall_backstop() {
        let mut clock = GuestClock::new(Duration::from_secs(60), Duration::from_millis(20));
        clock.restart();
        std::thread::sleep(Duration::from_millis(25));
        clock.exclude(Duration::from_millis(25));
        assert_eq!(clock.charge(), Ok(()), "the excluded wait is not counted");
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(clock.charge(), Err(Overrun::WallTime));
    }

    #[test]
    fn the_wall_backstop_holds_whatever_the_cpu() {
        let mut clock = GuestClock::new(Duration::from_secs(60), Duration::from_millis(20));
        clock.restart();
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(clock.charge(), Err(Overrun::WallTime));
    }
}
