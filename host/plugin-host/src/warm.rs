//! Instance work done off the request path. Instantiating an adapter in a
//! fresh store costs tens of microseconds, and dropping a used one a few more,
//! which a request at c=1 used to wait for. Each adapter keeps a few
//! instances ready; a request takes one and queues a job for its
//! replacement, and queues its used store to be dropped. Both are done after
//! the request answered.
//!
//! Queuing a job does not wake the thread. Waking a sleeping thread is a
//! futex wake and, on a virtual machine, an inter-processor interrupt: about
//! 6 µs on the waker's core, measured with `perf` at c=1 on two cores, where
//! a guarded request queued six jobs and paid for six wakes; and the
//! instance the thread made is then cold in the cache of the core that uses
//! it. Instead, the server calls [`Warmer::after_response`] once a response
//! has been written: when no other request is in flight, the task that
//! answered does the jobs itself, off every answer's path, on the core whose
//! cache the next request will use. Under load the thread does them, on
//! idle time only. It also takes jobs that pile up or that were queued
//! outside any request (a batch, a background run), on its timer, so none
//! waits longer than [`LONGEST_WAIT`].
//!
//! An instance is still used by exactly one request and dropped after it: a
//! ready instance has run nothing but its component's start code, as a fresh
//! one would have.
//!
//! The queue is bounded. When the warmer falls behind (a saturated host), a
//! request drops its store itself and no replacement is asked for, so the
//! next request instantiates its own: the work is never lost or piled up,
//! only done inline as before.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// Jobs waiting at most: a few per core is plenty when the thread keeps up.
const QUEUE: usize = 64;
/// Jobs that wake the thread: more than the responses finishing are doing.
const WAKE_AT: usize = 8;
/// Jobs one finished response does at most, so that the next request on
/// its connection is not kept waiting behind a backlog.
const AFTER_RESPONSE: usize = 4;
/// The longest a queued job waits when no response does it.
const LONGEST_WAIT: Duration = Duration::from_millis(20);

/// Something that can make one more ready instance of itself: an adapter,
/// or a guardrail of the component host.
pub trait Refill: Send + Sync {
    fn refill(&self);
}

enum Job {
    Refill(Arc<dyn Refill>),
    Discard(Box<dyn Send>),
}

impl Job {
    fn run(self) {
        match self {
            Job::Refill(what) => what.refill(),
            Job::Discard(used) => drop(used),
        }
    }
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// The thread waits on the condvar: only then does a notify do anything
    /// (and cost a system call).
    asleep: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

/// A handle on the warmer thread; clones share it. The thread ends once
/// every handle is gone.
#[derive(Clone)]
pub struct Warmer(Arc<Shared>);

impl Warmer {
    pub(crate) fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("wasm-warmer".into())
            .spawn(move || {
                run_only_when_idle();
                run(weak)
            })
            .expect("cannot start the wasm warmer thread");
        Self(shared)
    }

    /// Asks for one more ready instance of `what`; false when the warmer is
    /// behind and will not make it. Never blocks on the thread.
    pub fn refill(&self, what: Arc<dyn Refill>) -> bool {
        self.queue(Job::Refill(what)).is_ok()
    }

    /// Drops `used` on the warmer thread, or here when the warmer is behind.
    pub fn discard(&self, used: Box<dyn Send>) {
        if let Err(job) = self.queue(Job::Discard(used)) {
            drop(job);
        }
    }

    /// Called when a response has been written. With no other request in
    /// flight, does a few queued jobs here, oldest first: the work costs the
    /// task that answered, not an answer, and no thread is woken. With others
    /// in flight, hands them to the thread instead, which runs only on a core
    /// nothing else wants: doing them here would take that time from the
    /// requests waiting (measured: c=64 throughput fell by a tenth).
    pub fn after_response(&self, others_in_flight: bool) {
        if others_in_flight {
            let queue = self.0.queue.lock().expect("warmer queue poisoned");
            if queue.asleep && !queue.jobs.is_empty() {
                self.0.wake.notify_one();
            }
            return;
        }
        self.run_queued();
    }

    /// Does a few queued jobs here, oldest first.
    fn run_queued(&self) {
        let jobs: Vec<Job> = {
            let mut queue = self.0.queue.lock().expect("warmer queue poisoned");
            let take = queue.jobs.len().min(AFTER_RESPONSE);
            queue.jobs.drain(..take).collect()
        };
        jobs.into_iter().for_each(Job::run);
    }

    fn queue(&self, job: Job) -> Result<(), Job> {
        let mut queue = self.0.queue.lock().expect("warmer queue poisoned");
        if queue.jobs.len() >= QUEUE {
            return Err(job);
        }
        queue.jobs.push(job);
        if queue.asleep && queue.jobs.len() >= WAKE_AT {
            self.0.wake.notify_one();
        }
        Ok(())
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

/// Runs queued jobs in batches until every [`Warmer`] handle is gone.
fn run(shared: Weak<Shared>) {
    loop {
        let Some(shared) = shared.upgrade() else { return };
        let jobs = {
            let mut queue = shared.queue.lock().expect("warmer queue poisoned");
            if queue.jobs.is_empty() {
                queue.asleep = true;
                queue = shared
                    .wake
                    .wait_timeout(queue, LONGEST_WAIT)
                    .expect("warmer queue poisoned")
                    .0;
                queue.asleep = false;
            }
            std::mem::take(&mut queue.jobs)
        };
        // Handles may all be gone while the jobs run; the jobs still finish.
        drop(shared);
        jobs.into_iter().for_each(Job::run);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use super::*;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Refill for Count {
        fn refill(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn wait_for(count: &Count, n: usize) -> Duration {
        let started = Instant::now();
        while count.0.load(Ordering::SeqCst) < n {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the warmer never ran its jobs"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        started.elapsed()
    }

    #[test]
    fn the_thread_runs_queued_jobs_when_no_response_does() {
        let warmer = Warmer::start();
        let count = Arc::new(Count::default());
        assert!(warmer.refill(count.clone()));
        wait_for(&count, 1);
        for _ in 0..WAKE_AT {
            assert!(warmer.refill(count.clone()));
        }
        wait_for(&count, 1 + WAKE_AT);
    }

    #[test]
    fn a_finished_response_does_a_few_queued_jobs_oldest_first() {
        // No thread: only `run_queued` drains the queue.
        let warmer = Warmer(Arc::new(Shared::default()));
        let count = Arc::new(Count::default());
        let dropped = Arc::new(AtomicUsize::new(0));
        warmer.discard(Box::new(Dropped(dropped.clone())));
        for _ in 0..AFTER_RESPONSE {
            assert!(warmer.refill(count.clone()));
        }
        // Others in flight: left for the thread (there is none here).
        warmer.after_response(true);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        warmer.after_response(false);
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "the oldest job went first");
        assert_eq!(count.0.load(Ordering::SeqCst), AFTER_RESPONSE - 1);
        warmer.after_response(false);
        assert_eq!(count.0.load(Ordering::SeqCst), AFTER_RESPONSE);
        assert!(warmer.0.queue.lock().unwrap().jobs.is_empty());
    }

    struct Dropped(Arc<AtomicUsize>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_full_queue_refuses_refills_and_drops_discards_in_place() {
        // No thread: nothing drains the queue.
        let warmer = Warmer(Arc::new(Shared::default()));
        let count = Arc::new(Count::default());
        for _ in 0..QUEUE {
            assert!(warmer.refill(count.clone()));
        }
        assert!(!warmer.refill(count.clone()), "past the bound, a refill is refused");
        let dropped = Arc::new(AtomicUsize::new(0));
        warmer.discard(Box::new(Dropped(dropped.clone())));
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "a discard past the bound is dropped at once"
        );
        assert_eq!(warmer.0.queue.lock().unwrap().jobs.len(), QUEUE);
    }
}
