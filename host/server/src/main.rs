//! The `tollgate` binary: the CLI in `tollgate::cli`, with errors printed in full.

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

/// Caps glibc's malloc arenas at [`MALLOC_ARENAS`]. glibc gives threads that
/// allocate at once arenas of their own, up to eight per core, and an arena
/// keeps the pages its thread freed. With a thread per SQLite connection
/// beside the runtime's workers, that was about a third of a busy gateway's
/// memory under `tollgate-bench soak`, and still growing after eight minutes
/// (docs/operations.md, "Memory", has the figures). An operator's
/// `MALLOC_ARENA_MAX` wins.
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
