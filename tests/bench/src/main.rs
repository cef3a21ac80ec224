//! Benchmark harness: the Tollgate gateway against the mock provider it
//! fronts, measured in the same run so the machine's noise hits both paths.
//! See `--help`; build with `cargo build --release -p tollgate-bench`.

mod load;
mod procs;
mod report;
mod stats;
mod stream;
mod target;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, ensure};
use clap::Parser;
use reqwest::Client;

use crate::procs::Stack;
use crate::report::{Level, Report, Stream};
use crate::target::Target;

/// Upper bounds, so a typo cannot start an unbounded run.
const MAX_CONCURRENCY: usize = 1024;
const MAX_DURATION_SECS: u64 = 600;
/// Streaming measurement stops after this long whatever the request count.
const STREAM_BUDGET: Duration = Duration::from_secs(60);

#[derive(Parser)]
#[command(about = "Benchmark the Tollgate gateway against the direct mock, in the same run")]
struct Args {
    /// The tollgate binary to measure; the mock is the `tollgate-mock-upstream`
    /// beside it. `TOLLGATE_BENCH_BIN` lets `ab.sh` compare two builds.
    #[arg(long, env = "TOLLGATE_BENCH_BIN", default_value_os_t = default_bin())]
    tollgate_bin: PathBuf,
    /// Closed-loop concurrency levels (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Measured time per concurrency level and path.
    #[arg(long, default_value_t = 5)]
    duration_secs: u64,
    /// Unmeasured load per path at the highest concurrency, before measuring.
    #[arg(long, default_value_t = 1)]
    warmup_secs: u64,
    /// Request budget per run (a run also ends at its deadline).
    #[arg(long, default_value_t = 2_000_000)]
    max_requests: usize,
    /// Sequential streaming requests per path.
    #[arg(long, default_value_t = 100)]
    stream_requests: usize,
    /// Words (content chunks) per streamed answer, via `mock.words`.
    #[arg(long, default_value_t = 50)]
    stream_words: usize,
    /// Model requested through the gateway.
    #[arg(long, default_value = "mock/small")]
    gateway_model: String,
    /// Model requested from the mock directly.
    #[arg(long, default_value = "small")]
    direct_model: String,
    /// How long the mock and the gateway may take to become healthy.
    #[arg(long, default_value_t = 120)]
    startup_timeout_secs: u64,
    /// Write the JSON results here instead of printing them after the table.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Use a running gateway (origin, e.g. http://127.0.0.1:8080) instead of spawning one.
    #[arg(long, requires_all = ["mock_url", "api_key"], conflicts_with = "self_test")]
    gateway_url: Option<String>,
    /// Origin of the running mock for the direct path (with --gateway-url).
    #[arg(long, requires = "gateway_url")]
    mock_url: Option<String>,
    /// Gateway API key (with --gateway-url).
    #[arg(long, requires = "gateway_url")]
    api_key: Option<String>,
    /// Pid of the running gateway, to report its peak RSS (with --gateway-url).
    #[arg(long, requires = "gateway_url")]
    gateway_pid: Option<u32>,
    /// Check the harness alone: an in-process mock serves both paths.
    #[arg(long)]
    self_test: bool,
}

fn default_bin() -> PathBuf {
    // tests/bench → workspace root.
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/tollgate"))
}

/// Where the two paths point, and what keeps them alive.
struct Endpoints {
    mode: &'static str,
    mock_url: String,
    gateway_url: String,
    api_key: String,
    gateway_pid: Option<u32>,
    stack: Option<Stack>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // On a signal the run future is dropped, which kills the children.
    tokio::select! {
        result = run(args) => match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bench: {e:#}");
                ExitCode::FAILURE
            }
        },
        () = interrupted() => {
            eprintln!("bench: interrupted");
            ExitCode::from(130)
        }
    }
}

async fn run(args: Args) -> Result<()> {
    ensure!(!args.concurrency.is_empty(), "--concurrency needs at least one level");
    ensure!(
        args.concurrency.iter().all(|&c| (1..=MAX_CONCURRENCY).contains(&c)),
        "concurrency levels must be within 1..={MAX_CONCURRENCY}"
    );
    ensure!(
        args.duration_secs <= MAX_DURATION_SECS && args.warmup_secs <= MAX_DURATION_SECS,
        "durations are capped at {MAX_DURATION_SECS} s"
    );
    let max_concurrency = *args.concurrency.iter().max().unwrap_or(&1);
    let client = target::client(max_concurrency)?;
    let endpoints = endpoints(&args, &client).await?;

    let direct = Arc::new(Target::new(
        "direct",
        &endpoints.mock_url,
        None,
        &args.direct_model,
        args.stream_words,
    )?);
    let gateway = Arc::new(Target::new(
        "gateway",
        &endpoints.gateway_url,
        Some(&endpoints.api_key),
        &args.gateway_model,
        args.stream_words,
    )?);
    direct.check(&client).await?;
    gateway.check(&client).await?;

    let warmup = Duration::from_secs(args.warmup_secs);
    for t in [&direct, &gateway] {
        load::closed_loop(&client, t, max_concurrency, warmup, args.max_requests).await;
    }

    let duration = Duration::from_secs(args.duration_secs);
    let mut levels = Vec::new();
    for &c in &args.concurrency {
        eprintln!("bench: concurrency {c}");
        let d = load::closed_loop(&client, &direct, c, duration, args.max_requests).await;
        let g = load::closed_loop(&client, &gateway, c, duration, args.max_requests).await;
        levels.push(Level::new(c, &d, &g));
    }

    eprintln!("bench: streaming");
    let d = stream::measure(&client, &direct, args.stream_requests, STREAM_BUDGET).await;
    let g = stream::measure(&client, &gateway, args.stream_requests, STREAM_BUDGET).await;

    let report = Report {
        mode: endpoints.mode,
        duration_secs: args.duration_secs,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load: levels,
        stream: Stream::new(args.stream_words, &d, &g),
        gateway_peak_rss_kib: endpoints.gateway_pid.and_then(procs::peak_rss_kib),
    };
    if let Some(stack) = endpoints.stack {
        stack.shutdown().await;
    }

    report.print_table();
    let json = serde_json::to_string_pretty(&report)?;
    match &args.json {
        Some(path) => {
            std::fs::write(path, json + "\n")?;
            eprintln!("bench: results written to {}", path.display());
        }
        None => println!("\n{json}"),
    }
    Ok(())
}

async fn endpoints(args: &Args, client: &Client) -> Result<Endpoints> {
    if args.self_test {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        // Serves until the process exits.
        tokio::spawn(tollgate_mock_upstream::serve(listener, Default::default()));
        return Ok(Endpoints {
            mode: "self-test",
            mock_url: url.clone(),
            gateway_url: url,
            api_key: "sk-self-test".into(),
            gateway_pid: None,
            stack: None,
        });
    }
    if let Some(gateway_url) = &args.gateway_url {
        // clap enforces that these come together.
        return Ok(Endpoints {
            mode: "external",
            mock_url: args.mock_url.clone().unwrap_or_default(),
            gateway_url: gateway_url.clone(),
            api_key: args.api_key.clone().unwrap_or_default(),
            gateway_pid: args.gateway_pid,
            stack: None,
        });
    }
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    let stack = Stack::start(&args.tollgate_bin, client, timeout).await?;
    Ok(Endpoints {
        mode: "spawned",
        mock_url: stack.mock_url.clone(),
        gateway_url: stack.gateway_url.clone(),
        api_key: stack.api_key.clone(),
        gateway_pid: stack.gateway_pid(),
        stack: Some(stack),
    })
}

/// Ctrl-C or SIGTERM.
async fn interrupted() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
