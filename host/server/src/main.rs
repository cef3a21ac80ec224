//! The `tollgate` binary: the CLI in `tollgate::cli`, with errors printed in full.

/// jemalloc serves the gateway's own allocations. Under glibc's malloc, about
/// a quarter of a busy gateway's CPU went to malloc and free, and a tenth to
/// waiting on and waking arena locks: a request's buffers are allocated on one
/// runtime worker and often freed on the other (tasks move between workers),
/// and such a free takes the owning arena's lock. jemalloc's per-thread caches
/// take those frees without a lock. Measured at 64 concurrent requests on two
/// cores: 166 → 135 µs of CPU per request (docs/operations.md, "Memory").
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts (an operator's `_RJEM_MALLOC_CONF`
/// is applied after them). One arena: a gateway has two busy threads per core
/// at most, and each further arena kept pages of its own (about 4 MiB more at
/// the peak of 64 concurrent requests). Dirty pages go back to the kernel
/// after 200 ms instead of 10 s, from jemalloc's own background thread rather
/// than inside a request's free.
#[cfg(target_os = "linux")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: StaticCStrPtr =
    StaticCStrPtr(c"narenas:1,background_thread:true,dirty_decay_ms:200,muzzy_decay_ms:0".as_ptr());

/// A C string's address, as jemalloc reads `malloc_conf` (`const char *`).
#[cfg(target_os = "linux")]
#[repr(transparent)]
struct StaticCStrPtr(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, never written.
#[cfg(target_os = "linux")]
unsafe impl Sync for StaticCStrPtr {}

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    match tollgate::cli::main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Caps glibc's malloc arenas at [`MALLOC_ARENAS`]; glibc still serves the C
/// code's allocations (SQLite's). glibc gives threads that allocate at once
/// arenas of their own, up to eight per core, and an arena keeps the pages
/// its thread freed. With a thread per SQLite connection beside the runtime's
/// workers, that was about a third of a busy gateway's memory under
/// `tollgate-bench soak`, and still growing after eight minutes, while glibc
/// served all of it (docs/operations.md, "Memory", has the figures). An
/// operator's `MALLOC_ARENA_MAX` wins.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    const MALLOC_ARENAS: libc::c_int = 4;
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter. It runs first
        // thing in main, before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}
