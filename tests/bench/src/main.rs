//! Benchmark harness: the Tollgate gateway, in several configurations, against
//! the mock provider it fronts, each configuration measured next to the direct
//! mock in the same run so the machine's noise hits both paths. Optionally a
//! LiteLLM proxy in front of the same mock gets a row too.
//! `tollgate-bench soak` is the sustained-load soak instead (`soak.rs`).
//! See `--help`; build with `cargo build --release -p tollgate-bench`.
#![forbid(unsafe_code)]

mod configs;
mod floor;
mod litellm;
mod load;
mod measure;
mod pair;
mod peers;
mod procs;
mod report;
mod rows;
mod soak;
mod stack;
mod stats;
mod stream;
mod table;
mod target;
mod targets;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, ensure};
use clap::Parser;

use crate::configs::Configuration;
use crate::measure::Plan;
use crate::report::Report;
use crate::stack::Mock;
use crate::target::Target;

/// Upper bounds, so a typo cannot start an unbounded run.
const MAX_CONCURRENCY: usize = 1024;
const MAX_DURATION_SECS: u64 = 600;
/// Streaming measurement stops after this long whatever the request count.
const STREAM_BUDGET: Duration = Duration::from_secs(60);

#[derive(Parser)]
#[command(
    about = "Benchmark the Tollgate gateway against the direct mock, in the same run",
    after_help = "`tollgate-bench soak --help`: sustained load on one default gateway (disk per request, RSS over time).\n\
                  `tollgate-bench pair --help`: what one feature adds at c=1, from two requests sent alternately."
)]
struct Args {
    /// The tollgate binary to measure; the mock is the `tollgate-mock-upstream`
    /// beside it. `TOLLGATE_BENCH_BIN` lets `ab.sh` compare two builds.
    #[arg(long, env = "TOLLGATE_BENCH_BIN", default_value_os_t = workspace_path("target/release/tollgate"))]
    tollgate_bin: PathBuf,
    /// Gateway configurations to measure in turn (comma-separated), each a
    /// fresh gateway and data directory in front of the same mock, its
    /// settings applied over the inherited `TOLLGATE_*` environment.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "default,wallet-off,metering-off",
        conflicts_with = "gateway_url"
    )]
    configs: Vec<Configuration>,
    /// Closed-loop concurrency levels (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Measured time per concurrency level and path.
    #[arg(long, default_value_t = 5)]
    duration_secs: u64,
    /// Unmeasured load per path at the highest concurrency, before each row.
    #[arg(long, default_value_t = 1)]
    warmup_secs: u64,
    /// Request budget per run (a run also ends at its deadline).
    #[arg(long, default_value_t = 2_000_000)]
    max_requests: usize,
    /// Sequential streaming requests per path and row.
    #[arg(long, default_value_t = 100)]
    stream_requests: usize,
    /// Words (content chunks) per streamed answer, via `mock.words`.
    #[arg(long, default_value_t = 50)]
    stream_words: usize,
    /// Model requested through the gateway: `mock/small`, or `bench`, a model
    /// group over it and a second provider on the same mock (docs/routing.md).
    #[arg(long, env = "TOLLGATE_BENCH_GATEWAY_MODEL", default_value = "mock/small")]
    gateway_model: String,
    /// A `provider` preferences object (JSON) added to every request through
    /// the gateway, to measure what routing costs; empty for none.
    #[arg(long, env = "TOLLGATE_BENCH_PROVIDER", default_value = "")]
    provider: String,
    /// Model requested from the mock directly.
    #[arg(long, default_value = "small")]
    direct_model: String,
    /// How long the mock and each gateway may take to become healthy.
    #[arg(long, default_value_t = 120)]
    startup_timeout_secs: u64,
    /// Also measure the floor: `bench-floor`, a bare relay built from the
    /// gateway's own parts (axum, hyper, reqwest, tokio), in front of the same
    /// mock. What it adds is one more loopback hop on this machine, below
    /// which no gateway goes; the acceptance notes quote it.
    #[arg(long, conflicts_with = "self_test")]
    floor: bool,
    /// Also measure LiteLLM (`litellm[proxy]`, pinned in
    /// tests/bench/litellm-requirements.txt) in front of the same mock; the
    /// first run installs it into --litellm-venv. A failed install is reported
    /// and the run goes on without the row.
    #[arg(long)]
    litellm: bool,
    /// LiteLLM's worker processes.
    #[arg(long, default_value_t = 2)]
    litellm_workers: usize,
    /// The venv LiteLLM is installed into (created if missing, reused while
    /// its pin matches).
    #[arg(long, default_value_os_t = workspace_path("target/bench-litellm-venv"))]
    litellm_venv: PathBuf,
    /// The Python that creates the LiteLLM venv.
    #[arg(long, default_value = "python3.11")]
    litellm_python: String,
    /// Another gateway measured in front of the same mock, as NAME=URL: its
    /// OpenAI-compatible origin (repeatable). `{port}` in URL is a free port
    /// the bench picks, for `--peer-start`. See tests/bench/README.md for
    /// building agentgateway and TensorZero from their sources.
    #[arg(long = "peer", value_name = "NAME=URL", conflicts_with = "self_test")]
    peers: Vec<String>,
    /// How the bench starts a peer before its row and stops it after:
    /// NAME=COMMAND, run with `sh -c` once `{port}`, `{mock_url}` and
    /// `{mock_addr}` (host:port) are replaced.
    #[arg(long = "peer-start", value_name = "NAME=COMMAND")]
    peer_starts: Vec<String>,
    /// The model a peer is asked for, NAME=MODEL (default: --direct-model).
    #[arg(long = "peer-model", value_name = "NAME=MODEL")]
    peer_models: Vec<String>,
    /// A peer's API key, NAME=KEY (default: none).
    #[arg(long = "peer-key", value_name = "NAME=KEY")]
    peer_keys: Vec<String>,
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
    /// Check the harness alone: an in-process mock serves both paths of every
    /// configuration's row (the configurations then change nothing).
    #[arg(long)]
    self_test: bool,
}

/// A path under the workspace root (two levels above tests/bench).
fn workspace_path(rel: &str) -> PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).join(rel)
}

#[tokio::main]
async fn main() -> ExitCode {
    let subcommand = std::env::args_os().nth(1);
    let work = async move {
        match subcommand.as_ref().and_then(|a| a.to_str()) {
            Some("soak") => soak::run(soak::Args::parse_from(std::env::args_os().skip(1))).await,
            Some("pair") => pair::run(pair::Args::parse_from(std::env::args_os().skip(1))).await,
            _ => run(Args::parse()).await,
        }
    };
    // On a signal the run future is dropped, which kills the children.
    tokio::select! {
        result = work => match result {
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
    ensure!(!args.configs.is_empty(), "--configs needs at least one configuration");
    ensure!(args.litellm_workers >= 1, "--litellm-workers must be at least 1");
    let peers = peers::parse(
        &args.peers,
        &args.peer_starts,
        &args.peer_models,
        &args.peer_keys,
        &args.direct_model,
    )?;
    let plan = Plan {
        concurrency: args.concurrency.clone(),
        duration: Duration::from_secs(args.duration_secs),
        warmup: Duration::from_secs(args.warmup_secs),
        max_requests: args.max_requests,
        stream_requests: args.stream_requests,
        stream_words: args.stream_words,
        stream_budget: STREAM_BUDGET,
    };
    let max_concurrency = args.concurrency.iter().copied().max().unwrap_or(1);
    let client = target::client(max_concurrency)?;
    let timeout = Duration::from_secs(args.startup_timeout_secs);

    let (mode, mock_url, mock) = if args.self_test {
        ("self-test", in_process_mock().await?, None)
    } else if let Some(url) = &args.mock_url {
        ("external", url.clone(), None)
    } else {
        let mock = Mock::start(&args.tollgate_bin, &client, timeout).await?;
        ("spawned", mock.url.clone(), Some(mock))
    };
    let direct = Arc::new(Target::new(
        "direct",
        &mock_url,
        None,
        &args.direct_model,
        args.stream_words,
    )?);

    let mut configs = match (&mock, &args.gateway_url) {
        (Some(mock), _) => rows::gateways(&args, &plan, &client, &direct, mock).await?,
        (None, Some(url)) => vec![rows::external(&args, &plan, &client, &direct, url).await?],
        (None, None) => rows::self_test(&args, &plan, &client, &direct, &mock_url).await?,
    };
    if args.floor {
        eprintln!("bench: floor (bare relay)");
        let floor = floor::row(
            &plan,
            &client,
            &direct,
            &mock_url,
            &args.direct_model,
            args.stream_words,
            timeout,
        )
        .await?;
        configs.push(floor);
    }
    let litellm = match args.litellm {
        true => Some(rows::litellm(&args, &plan, &client, &direct, &mock_url, &mut configs).await),
        false => None,
    };
    for peer in &peers {
        eprintln!("bench: peer {}", peer.name);
        match peers::row(peer, &plan, &client, &direct, &mock_url, args.stream_words, timeout).await {
            Ok(row) => configs.push(row),
            Err(e) => eprintln!("bench: peer {} failed; going on without its row: {e:#}", peer.name),
        }
    }
    if let Some(mock) = mock {
        mock.stop().await;
    }

    let report = Report {
        mode,
        duration_secs: args.duration_secs,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        concurrency: args.concurrency.clone(),
        acceptance: targets::evaluate(&configs),
        configs,
        litellm,
    };
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

async fn in_process_mock() -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    // Serves until the process exits.
    tokio::spawn(tollgate_mock_upstream::serve(listener, Default::default()));
    Ok(url)
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
