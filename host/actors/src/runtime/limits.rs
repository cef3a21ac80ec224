//! What one run may make the gateway do, whatever its budget says: the
//! operator's caps on top of the actor's own `budget`, and the pool that
//! tenant computation (templates, schema checks) runs on.
//!
//! A template is tenant code: minijinja runs it with a fuel budget, which
//! bounds both its instructions and the data it creates (checked before a
//! large string is allocated), and its value is converted with a byte cap
//! (a lazily repeated list costs no fuel until it is walked). Renders run on
//! the blocking pool, at most [`Engine::new`]'s `threads` at once: a
//! spinning template cannot stall other requests, and a run that is
//! cancelled or times out stops waiting for it at once (the render itself
//! ends within its fuel). Most templates are tiny, so each is first tried
//! in place with a small slice of fuel and bytes ([`QUICK_FUEL`],
//! [`QUICK_BYTES`]: well under a millisecond of a runtime worker); only one
//! that needs more moves to the pool, where it starts over with the full
//! limits (templates have no side effects), in a child process capped in
//! memory (`isolate.rs`): fuel bounds a render's instructions, but one of
//! minijinja's own operations can build a huge value before fuel is charged.

use std::sync::Arc;

use std::fmt::Write as _;

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, Output, State, UndefinedBehavior, Value};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;

pub use super::isolate::Isolation;
use super::templates::Problem;

/// Fuel of a template's first attempt, in place on a runtime worker.
pub const QUICK_FUEL: u64 = 10_000;
/// Bytes a template's first attempt may produce.
pub const QUICK_BYTES: u64 = 64 << 10;
/// Stack of a render thread (address space; only the pages used are
/// resident). 200,000 fuel nests a list about 25,000 deep; dropping it takes
/// about 10 MiB of stack in a debug build.
pub const RENDER_STACK: usize = 64 << 20;

/// The operator's caps on every run (docs/actors.md, "Limits").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// minijinja fuel of one template evaluation: about one unit per
    /// instruction, and one per 64 bytes of data it creates or writes.
    pub template_fuel: u64,
    /// Bytes one step's templates may produce together (text, or values as
    /// JSON): a prompt and its system message, a `return`'s whole shape.
    pub max_template_bytes: u64,
    /// Bytes all of a run's templates may produce together.
    pub max_rendered_bytes: u64,
    /// Ceiling on an actor's `budget.max_steps`.
    pub max_steps: u32,
    /// Sub-actor runs (subtasks and map items, nested ones included) one run
    /// may start.
    pub max_sub_runs: u32,
    /// Size of a run's provenance trail, in bytes of JSON (estimated as
    /// steps finish; the run stops at its next step past it).
    pub max_trail_bytes: u64,
    /// Memory a render on the pool may allocate beyond what the gateway had
    /// when it started (the render runs in a child process capped at that,
    /// see `isolate.rs`): past it the render fails with `template_limit`.
    pub render_memory_bytes: u64,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            template_fuel: 200_000,
            max_template_bytes: 2 << 20,
            max_rendered_bytes: 32 << 20,
            max_steps: 10_000,
            max_sub_runs: 1_024,
            max_trail_bytes: 4 << 20,
            render_memory_bytes: 128 << 20,
        }
    }
}

/// The limits and the bounded pool renders run on; shared by every run of a
/// gateway.
pub struct Engine {
    limits: RunLimits,
    environment: Environment<'static>,
    /// The same with [`QUICK_FUEL`], for first attempts in place.
    quick: Environment<'static>,
    /// Renders in progress, gateway-wide. A permit is held by the blocking
    /// task itself, so a render its run abandoned still counts until it ends.
    threads: Arc<Semaphore>,
}

impl Engine {
    /// `threads`: how many renders may run at once (at least one).
    pub fn new(limits: RunLimits, threads: usize) -> Self {
        let environment = |fuel: u64| {
            let mut environment = Environment::new();
            environment.set_undefined_behavior(UndefinedBehavior::Strict);
            environment.set_fuel(Some(fuel.max(1)));
            environment.set_formatter(bounded_formatter);
            environment
        };
        Self {
            environment: environment(limits.template_fuel),
            quick: environment(QUICK_FUEL.min(limits.template_fuel)),
            limits,
            threads: Arc::new(Semaphore::new(threads.max(1))),
        }
    }

    /// One thread fewer than the machine has (at least one), so renders
    /// leave a core to the runtime's workers.
    pub fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
    }

    pub fn limits(&self) -> &RunLimits {
        &self.limits
    }

    pub(crate) fn environment(&self, quick: bool) -> &Environment<'static> {
        if quick { &self.quick } else { &self.environment }
    }

    /// Runs `work` on tokio's blocking pool (threads reused, ordinary
    /// stacks) once one of the `threads` is free: for work whose depth is
    /// bounded, such as checking JSON (128 levels at most) against a schema.
    pub(crate) async fn pooled<T: Send + 'static>(self: &Arc<Self>, work: impl FnOnce() -> T + Send + 'static) -> T {
        let permit = self
            .threads
            .clone()
            .acquire_owned()
            .await
            .expect("the render semaphore is never closed");
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        });
        match task.await {
            Ok(value) => value,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down: nobody will read the answer.
            Err(_) => std::future::pending().await,
        }
    }

    /// Runs `work` on a render thread of its own once one of the `threads`
    /// is free. The returned future may be dropped at any time (a timeout, a
    /// caller gone): the work then ends on its own, and its permit with it.
    ///
    /// The thread has a [`RENDER_STACK`] stack: a template can nest lists as
    /// deep as its fuel allows (`{% set ns.x = [ns.x] %}` in a loop), and
    /// dropping such a value recurses once per level, which would overflow a
    /// runtime thread's 2 MiB and abort the process.
    ///
    /// On Linux the work itself runs in a child process forked from that
    /// thread, with [`RunLimits::render_memory_bytes`] of memory and until
    /// `deadline` (`isolate.rs`): minijinja can build a huge value in one
    /// operation before fuel is charged for it, and only the child dies.
    pub(crate) async fn blocking<T: Serialize + DeserializeOwned + Send + 'static>(
        self: &Arc<Self>,
        deadline: Option<std::time::Instant>,
        work: impl FnOnce(&Engine) -> T + Send + 'static,
    ) -> Result<T, Isolation> {
        let permit = self
            .threads
            .clone()
            .acquire_owned()
            .await
            .expect("the render semaphore is never closed");
        let engine = self.clone();
        let (done, answer) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("actor-render".into())
            .stack_size(RENDER_STACK)
            .spawn(move || {
                let _permit = permit;
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    isolated(engine.limits.render_memory_bytes, deadline, || work(&engine))
                }));
                let _ = done.send(outcome);
            })
            .expect("the OS refused a render thread");
        match answer.await {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => unreachable!("a render thread always answers, panics included"),
        }
    }

    /// A template's full-limits attempt: `work` on a render thread, in the
    /// isolated child, until `deadline`. Running out of memory or a child
    /// that gave no answer is the template's [`Problem::Limit`], as fuel is;
    /// `None` means the deadline came first. Actor steps and standalone
    /// prompt templates both go through here, so both are bounded alike.
    pub(crate) async fn render_isolated<T: Serialize + DeserializeOwned + Send + 'static>(
        self: &Arc<Self>,
        deadline: tokio::time::Instant,
        work: impl FnOnce(&Engine) -> (Result<T, Problem>, u64) + Send + 'static,
    ) -> Option<(Result<T, Problem>, u64)> {
        let job = self.blocking(Some(deadline.into_std()), work);
        match tokio::time::timeout_at(deadline, job).await {
            Ok(Ok(done)) => Some(done),
            Ok(Err(Isolation::Deadline)) | Err(_) => None,
            Ok(Err(Isolation::Memory)) => Some((
                Err(Problem::Limit(format!(
                    "it needed more than the {} MiB of memory a template may use",
                    self.limits.render_memory_bytes >> 20
                ))),
                0,
            )),
            Ok(Err(Isolation::Failed(reason))) => {
                Some((Err(Problem::Limit(format!("it could not be rendered ({reason})"))), 0))
            }
        }
    }
}

fn isolated<T: Serialize + DeserializeOwned>(
    memory: u64,
    deadline: Option<std::time::Instant>,
    work: impl FnOnce() -> T,
) -> Result<T, Isolation> {
    super::isolate::run(memory, deadline, work)
}

/// Prints a value as the default formatter does, but a list or map only as
/// far as the fuel left can pay for. minijinja charges output after it is
/// written, and a lazily repeated list (`[0] * 100000000`) costs no fuel
/// until then: printed whole, it would be hundreds of megabytes.
fn bounded_formatter(out: &mut Output, state: &mut State, value: &Value) -> Result<(), Error> {
    if !matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable | ValueKind::Map) {
        return minijinja::escape_formatter(out, state, value);
    }
    // Each item prints at least two bytes (`0, `): that much is paid before
    // the walk, so a huge list is refused without being walked.
    if let Some(items) = value.len() {
        state.consume_fuel((items as u64).saturating_mul(2) / 64 + 1)?;
    }
    let left = state
        .fuel_levels()
        .map_or(u64::MAX, |(_, remaining)| remaining.saturating_mul(64));
    let mut text = Capped {
        text: String::new(),
        left: usize::try_from(left).unwrap_or(usize::MAX),
    };
    if write!(text, "{value}").is_err() {
        return Err(Error::new(
            ErrorKind::OutOfFuel,
            "the value's text is larger than the template's fuel can pay for",
        ));
    }
    out.write_str(&text.text)
        .map_err(|_| Error::new(ErrorKind::WriteFailure, "the output could not be written"))
}

/// A string that refuses to grow past `left` more bytes.
struct Capped {
    text: String,
    left: usize,
}

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.left = self.left.checked_sub(s.len()).ok_or(std::fmt::Error)?;
        self.text.push_str(s);
        Ok(())
    }
}

impl Default for Engine {
    fn default() -> Self {
        Self::new(RunLimits::default(), Self::default_threads())
    }
}
