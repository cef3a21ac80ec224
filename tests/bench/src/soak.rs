//! `tollgate-bench soak`: sustained closed-loop load on one gateway as shipped
//! (SQLite, the default file sink), reporting what grows: bytes on disk per
//! request (database files with their WAL, event files with the rotated ones,
//! an archive directory if there is one), the gateway's RSS over time (VmRSS,
//! sampled) and its growth over the last two thirds, req/s at the start and at
//! the end, and errors. A short run (`--duration-secs 20`) fits CI; the issue's
//! plateau check is a 30-minute run by hand.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use clap::Parser;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::stack::{Gateway, Mock};
use crate::target::{self, Target};

const MAX_SOAK_SECS: u64 = 4 * 3600;

#[derive(Parser)]
#[command(
    name = "tollgate-bench soak",
    about = "Sustained load on one default gateway: disk bytes per request, RSS over time, req/s at start and end, errors"
)]
pub struct Args {
    /// The tollgate binary (the mock is the `tollgate-mock-upstream` beside it).
    #[arg(long, env = "TOLLGATE_BENCH_BIN", default_value_os_t = crate::workspace_path("target/release/tollgate"))]
    tollgate_bin: PathBuf,
    /// How long the load runs.
    #[arg(long, default_value_t = 60)]
    duration_secs: u64,
    /// Closed-loop workers.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// RSS, throughput and disk sampling period.
    #[arg(long, default_value_t = 5)]
    sample_secs: u64,
    /// How long the mock and the gateway may take to become healthy.
    #[arg(long, default_value_t = 120)]
    startup_timeout_secs: u64,
    /// Write the JSON results here instead of printing them after the table.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One sample: time since the load started, totals so far, and the gauges.
#[derive(Serialize, Clone)]
struct Sample {
    t_secs: f64,
    requests: u64,
    errors: u64,
    rss_kib: Option<u64>,
    disk: Disk,
}

/// Bytes under the gateway's data directory, by what they are.
#[derive(Serialize, Clone, Copy, Default)]
struct Disk {
    /// `tollgate.db` with its `-wal` and `-shm`.
    database: u64,
    /// `events/`: the file sink's active and rotated files.
    events: u64,
    /// Any `archive*` directory (request-log archival, when configured there).
    archive: u64,
    /// Everything else under the data directory.
    other: u64,
}

impl Disk {
    fn total(&self) -> u64 {
        self.database + self.events + self.archive + self.other
    }

    fn measure(data_dir: &Path) -> Disk {
        let mut disk = Disk::default();
        let Ok(entries) = fs::read_dir(data_dir) else {
            return disk;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let bytes = tree_bytes(&entry.path());
            match name.as_str() {
                n if n.starts_with("tollgate.db") => disk.database += bytes,
                "events" => disk.events += bytes,
                n if n.starts_with("archive") => disk.archive += bytes,
                _ => disk.other += bytes,
            }
        }
        disk
    }
}

/// Allocated bytes of a file or a directory tree (what `du` counts).
fn tree_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.blocks() * 512;
    }
    fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| tree_bytes(&e.path())).sum())
        .unwrap_or(0)
}

/// VmRSS of a live process, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[derive(Serialize)]
struct SoakReport {
    duration_secs: u64,
    concurrency: usize,
    requests: u64,
    errors: u64,
    /// Over the first and the last tenth of the run (at least one sample period).
    req_per_sec_start: f64,
    req_per_sec_end: f64,
    /// Data-directory growth from before the load to the end, per successful request.
    bytes_per_request: DiskPerRequest,
    disk_before: Disk,
    disk_after: Disk,
    rss_start_kib: Option<u64>,
    rss_end_kib: Option<u64>,
    rss_max_kib: Option<u64>,
    /// (end − RSS at one third of the run) / RSS at one third, in percent.
    rss_growth_last_two_thirds_pct: Option<f64>,
    samples: Vec<Sample>,
}

#[derive(Serialize)]
struct DiskPerRequest {
    database: f64,
    events: f64,
    archive: f64,
    other: f64,
    total: f64,
}

pub async fn run(args: Args) -> Result<()> {
    ensure!(
        (1..=MAX_SOAK_SECS).contains(&args.duration_secs),
        "--duration-secs must be within 1..={MAX_SOAK_SECS}"
    );
    ensure!(
        (1..=1024).contains(&args.concurrency),
        "--concurrency must be within 1..=1024"
    );
    ensure!(args.sample_secs >= 1, "--sample-secs must be at least 1");
    let client = target::client(args.concurrency)?;
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    let mock = Mock::start(&args.tollgate_bin, &client, timeout).await?;
    let gateway = Gateway::start(&args.tollgate_bin, &mock.addr, &[], &client, timeout).await?;
    let path = Arc::new(Target::new(
        "gateway",
        &gateway.url,
        Some(&gateway.api_key),
        "mock/small",
        0,
    )?);
    path.check(&client).await?;
    let pid = gateway.pid();
    let data_dir = gateway.data_dir();
    let disk_before = Disk::measure(&data_dir);

    let requests = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.duration_secs);
    let mut workers = JoinSet::new();
    for _ in 0..args.concurrency {
        let (client, path, requests, errors) = (client.clone(), path.clone(), requests.clone(), errors.clone());
        workers.spawn(async move {
            while Instant::now() < deadline {
                let ok = match path.request(&client, &path.body).send().await {
                    Ok(resp) => {
                        let success = resp.status().is_success();
                        resp.bytes().await.is_ok() && success
                    }
                    Err(_) => false,
                };
                match ok {
                    true => requests.fetch_add(1, Ordering::Relaxed),
                    false => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        });
    }

    let sample = |t: Duration| Sample {
        t_secs: t.as_secs_f64(),
        requests: requests.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        rss_kib: pid.and_then(rss_kib),
        disk: Disk::measure(&data_dir),
    };
    let mut samples = vec![sample(Duration::ZERO)];
    let period = Duration::from_secs(args.sample_secs);
    let mut next = start + period;
    while next < deadline {
        tokio::time::sleep_until(next.into()).await;
        let s = sample(start.elapsed());
        eprintln!(
            "soak: {:>6.0} s  {:>9} requests  {:>5} errors  RSS {:>7} KiB  disk {:>6.1} MiB",
            s.t_secs,
            s.requests,
            s.errors,
            s.rss_kib.map_or("?".into(), |k| k.to_string()),
            s.disk.total() as f64 / 1048576.0
        );
        samples.push(s);
        next += period;
    }
    while workers.join_next().await.is_some() {}
    samples.push(sample(start.elapsed()));
    // Let the metering dispatcher write what the last requests settled.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let disk_after = Disk::measure(&data_dir);
    gateway.stop().await;
    mock.stop().await;

    let report = summarize(&args, samples, disk_before, disk_after);
    report.print();
    let json = serde_json::to_string_pretty(&report)?;
    match &args.json {
        Some(path) => fs::write(path, json + "\n")?,
        None => println!("\n{json}"),
    }
    Ok(())
}

fn summarize(args: &Args, samples: Vec<Sample>, before: Disk, after: Disk) -> SoakReport {
    let last = samples.last().cloned().expect("at least two samples");
    let requests = last.requests;
    // The first and last tenth of the run, but at least one sample period.
    let window = (last.t_secs / 10.0).max(args.sample_secs as f64);
    let rate = |from: &Sample, to: &Sample| (to.requests - from.requests) as f64 / (to.t_secs - from.t_secs).max(1e-9);
    let first_after = samples.iter().find(|s| s.t_secs >= window).unwrap_or(&last);
    let last_before = samples
        .iter()
        .rev()
        .find(|s| s.t_secs <= last.t_secs - window)
        .unwrap_or(&samples[0]);
    let third = samples
        .iter()
        .find(|s| s.t_secs >= last.t_secs / 3.0)
        .and_then(|s| s.rss_kib);
    let per = |end: u64, start: u64| end.saturating_sub(start) as f64 / requests.max(1) as f64;
    SoakReport {
        duration_secs: args.duration_secs,
        concurrency: args.concurrency,
        requests,
        errors: last.errors,
        req_per_sec_start: rate(&samples[0], first_after),
        req_per_sec_end: rate(last_before, &last),
        bytes_per_request: DiskPerRequest {
            database: per(after.database, before.database),
            events: per(after.events, before.events),
            archive: per(after.archive, before.archive),
            other: per(after.other, before.other),
            total: per(after.total(), before.total()),
        },
        disk_before: before,
        disk_after: after,
        rss_start_kib: samples[0].rss_kib,
        rss_end_kib: last.rss_kib,
        rss_max_kib: samples.iter().filter_map(|s| s.rss_kib).max(),
        rss_growth_last_two_thirds_pct: third
            .zip(last.rss_kib)
            .map(|(at_third, end)| (end as f64 - at_third as f64) / at_third as f64 * 100.0),
        samples,
    }
}

impl SoakReport {
    fn print(&self) {
        let mib = |kib: Option<u64>| kib.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        let b = &self.bytes_per_request;
        println!("soak: {} s at concurrency {}", self.duration_secs, self.concurrency);
        println!("  requests          {} ok, {} errors", self.requests, self.errors);
        println!(
            "  req/s             {:.0} at the start, {:.0} at the end ({:+.1} %)",
            self.req_per_sec_start,
            self.req_per_sec_end,
            (self.req_per_sec_end / self.req_per_sec_start.max(1e-9) - 1.0) * 100.0
        );
        println!(
            "  bytes/request     {:.0} total: database {:.0}, events {:.0}, archive {:.0}, other {:.0}",
            b.total, b.database, b.events, b.archive, b.other
        );
        println!(
            "  on disk after     database {:.1} MiB, events {:.1} MiB, archive {:.1} MiB",
            self.disk_after.database as f64 / 1048576.0,
            self.disk_after.events as f64 / 1048576.0,
            self.disk_after.archive as f64 / 1048576.0
        );
        println!(
            "  RSS               {} at the start, {} at the end, {} max; last two thirds {}",
            mib(self.rss_start_kib),
            mib(self.rss_end_kib),
            mib(self.rss_max_kib),
            self.rss_growth_last_two_thirds_pct
                .map_or("?".into(), |g| format!("{g:+.1} %"))
        );
        let series: Vec<String> = self
            .samples
            .iter()
            .map(|s| {
                format!(
                    "{:.0}s:{}",
                    s.t_secs,
                    s.rss_kib.map_or("?".into(), |k| (k / 1024).to_string())
                )
            })
            .collect();
        println!("  RSS series (MiB)  {}", series.join(" "));
    }
}
