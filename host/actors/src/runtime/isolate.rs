//! A render that needs the full limits runs in a forked child process with a
//! memory cap, so a template that makes minijinja build a huge value without
//! charging fuel for it first (formatting a lazily repeated list:
//! `'' ~ (['A' * 1000000] * 100000)` asks for 100 GB) fails alone instead of
//! taking the gateway's memory. Fuel already bounds a render's instructions;
//! what it cannot bound is the memory of one of minijinja's own operations,
//! and only the kernel can stop that part way.
//!
//! The child is a copy of the gateway at the fork, sharing its pages until it
//! writes them. It caps its data (`RLIMIT_DATA`) at what the gateway used
//! then plus the render's allowance, runs the render on the thread that
//! forked it (the only thread it has), writes the answer as JSON to a pipe
//! and leaves with `_exit`, running no destructor of the state it copied. An
//! allocation past the cap aborts the child, never the gateway. The render
//! thread waits for the answer until the run's deadline, then kills the child.
//!
//! Forking a threaded process is safe here because the child calls nothing
//! that another thread's lock could hold but the allocator, and both jemalloc
//! and glibc's malloc take their locks around `fork`.

use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why an isolated render gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// It needed more memory than its allowance (the child was aborted).
    Memory,
    /// The run's deadline passed first (the child was killed).
    Deadline,
    /// The child could not be started or answered nothing readable.
    Failed(String),
}

/// Runs `work` in a forked child that may allocate `memory` bytes more than
/// this process has now, and answers what it returned, unless it ran out of
/// memory or `deadline` came first.
pub fn run<T: Serialize + DeserializeOwned>(
    memory: u64,
    deadline: Option<Instant>,
    work: impl FnOnce() -> T,
) -> Result<T, Isolation> {
    let cap = data_now().saturating_add(memory);
    let (read, write) = pipe()?;
    // SAFETY: the child runs only `child` below, which ends in `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Isolation::Failed(format!("fork: {}", std::io::Error::last_os_error())));
    }
    if pid == 0 {
        drop(read);
        child(cap, write, work);
    }
    drop(write);
    let answer = read_until(read, deadline);
    if answer.is_err() {
        // SAFETY: `pid` is our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = reap(pid);
    let bytes = answer?;
    match (status, bytes.is_empty()) {
        (Exit::Code(0), false) => serde_json::from_slice(&bytes)
            .map_err(|e| Isolation::Failed(format!("the render's answer is unreadable: {e}"))),
        (Exit::Signal(libc::SIGABRT | libc::SIGSEGV | libc::SIGKILL), _) => Err(Isolation::Memory),
        (status, _) => Err(Isolation::Failed(format!("the render process ended with {status:?}"))),
    }
}

/// The child's whole life: cap its data, run the work, answer, leave.
fn child<T: Serialize>(cap: u64, write: OwnedFd, work: impl FnOnce() -> T) -> ! {
    let limit = libc::rlimit {
        rlim_cur: cap as libc::rlim_t,
        rlim_max: cap as libc::rlim_t,
    };
    // SAFETY: plain syscalls on this process; `_exit` never returns.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
            libc::_exit(3);
        }
        let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            Ok(value) => match serde_json::to_vec(&value) {
                Ok(bytes) => write_all(&write, &bytes),
                Err(_) => 4,
            },
            Err(_) => 5,
        };
        libc::_exit(code)
    }
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> i32 {
    use std::os::fd::AsRawFd as _;
    while !bytes.is_empty() {
        // SAFETY: writing from a live slice to our own pipe.
        let written = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if written <= 0 {
            return 6;
        }
        bytes = &bytes[written as usize..];
    }
    0
}

/// Reads the pipe to its end, giving up at `deadline`.
fn read_until(read: OwnedFd, deadline: Option<Instant>) -> Result<Vec<u8>, Isolation> {
    use std::os::fd::AsRawFd as _;
    let fd = read.as_raw_fd();
    let mut file = std::fs::File::from(read);
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    loop {
        let wait_ms = match deadline {
            None => -1,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Isolation::Deadline);
                }
                i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX)
            }
        };
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, for our own descriptor.
        let ready = unsafe { libc::poll(&mut poll, 1, wait_ms) };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Isolation::Failed(format!("poll: {error}")));
        }
        if ready == 0 {
            continue; // the deadline is checked at the top
        }
        match file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Isolation::Failed(format!("reading the render's answer: {e}"))),
        }
    }
}

#[derive(Debug)]
enum Exit {
    Code(i32),
    Signal(i32),
    Unknown,
}

fn reap(pid: libc::pid_t) -> Exit {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let done = unsafe { libc::waitpid(pid, &mut status, 0) };
        if done == pid {
            break;
        }
        if done < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Exit::Unknown;
        }
    }
    if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Unknown
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), Isolation> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Isolation::Failed(format!("pipe: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// This process's data size now (`VmData`), which `RLIMIT_DATA` counts.
fn data_now() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmData:"))
                .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_comes_back_and_a_greedy_child_dies_alone() {
        let answer = run(64 << 20, None, || vec![1u32, 2, 3]).unwrap();
        assert_eq!(answer, vec![1, 2, 3]);
        // A gigabyte is past the allowance: the child aborts, this process lives.
        let greedy = run(64 << 20, None, || vec![7u8; 1 << 30].len());
        assert_eq!(greedy, Err(Isolation::Memory));
        let slow = run(
            64 << 20,
            Some(Instant::now() + std::time::Duration::from_millis(200)),
            || {
                std::thread::sleep(std::time::Duration::from_secs(30));
                0
            },
        );
        assert_eq!(slow, Err(Isolation::Deadline));
    }
}
