//! Child processes (the mock, each gateway, LiteLLM): spawning, health waits
//! and cleanup. Each child leads its own process group, and the whole group is
//! killed when its handle drops, so an error or an interrupt anywhere cannot
//! leak a child or a worker it forked.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use reqwest::Client;
use tokio::process::{Child, Command};

pub struct Managed {
    name: String,
    child: Child,
    /// Group id (the child's pid) while the group may be alive.
    group: Option<u32>,
    log: PathBuf,
}

impl Managed {
    pub fn spawn(name: &str, program: &Path, args: &[&str], env: &[(&str, &str)], log: &Path) -> Result<Self> {
        let out = File::create(log)?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {name}: {} {}", program.display(), args.join(" ")))?;
        Ok(Self {
            name: name.to_owned(),
            group: child.id(),
            child,
            log: log.to_owned(),
        })
    }

    /// Polls `url` until it answers 2xx, the child exits, or `timeout` passes.
    pub async fn wait_healthy(&mut self, client: &Client, url: &str, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited ({status}) before becoming healthy; log:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            let probe = client.get(url).timeout(Duration::from_secs(2)).send().await;
            if probe.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!(
                    "{} not healthy at {url} after {timeout:?}; log:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// How the child ended, if it is no longer running: a measured process
    /// that dies turns the rest of its row into errors, and the bench must
    /// say so. Its log's tail goes to stderr.
    pub fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        eprintln!(
            "bench: {} exited ({status}) during its run; log:\n{}",
            self.name,
            self.log_tail()
        );
        Some(status.to_string())
    }

    /// Peak RSS of the group: the sum of each live member's VmHWM. For a
    /// single process that is its peak; for a master with workers it bounds
    /// the peak of the total from above (the peaks need not coincide).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let group = self.group?;
        let sum = group_members(group).into_iter().filter_map(peak_rss_kib).sum();
        (sum > 0).then_some(sum)
    }

    /// The child's pid while it may be alive.
    pub fn pid(&self) -> Option<u32> {
        self.group
    }

    /// Kills the group and reaps the leader (dropping would only kill).
    pub async fn stop(&mut self) {
        self.kill_group();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }

    fn kill_group(&mut self) {
        if let Some(group) = self.group.take() {
            // SIGKILL: nothing a benchmarked process saves on exit matters here.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{group}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// A port the OS considers free now. Another process could take it before
/// the child binds it; on loopback in a bench run that race is negligible.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Peak resident set size (VmHWM) of a live process, in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Live processes whose process group is `group`.
fn group_members(group: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| process_group(pid) == Some(group))
        .collect()
}

fn process_group(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(2)?.parse().ok()
}

/// A scratch directory for configs, data and logs, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Result<Self> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos();
        let path = std::env::temp_dir().join(format!("tollgate-bench-{}-{label}-{nanos}", std::process::id()));
        fs::create_dir_all(&path)?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_group_and_peak() {
        let me = std::process::id();
        let group = process_group(me).expect("own /proc/self/stat");
        assert!(group_members(group).contains(&me));
        assert!(peak_rss_kib(me).is_some_and(|kib| kib > 0));
    }
}
