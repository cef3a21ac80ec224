//! Tool-call benchmark (feature `tools`): the built-in calculator's
//! `evaluate`, called three ways in one run, so the machine's noise hits all:
//!
//! 1. `in-process`: the component host itself (fresh store: instantiate plus
//!    call, on a blocking thread), as the gateway does per call;
//! 2. `mcp c=N`: `tools/call` through `POST /v1/mcp` of a spawned gateway
//!    (HTTP, key check, JSON-RPC, lookup, then the same instantiate plus call).
//!
//! The report gives p50 and p99 per path and what MCP adds over the
//! in-process call. Build and run:
//! `cargo build --release -p tollgate-bench --features tools && target/release/bench-tools`.
#![forbid(unsafe_code)]

#[path = "../procs.rs"]
#[allow(dead_code)]
mod procs;
#[path = "../stack.rs"]
#[allow(dead_code)]
mod stack;
#[path = "../stats.rs"]
#[allow(dead_code)]
mod stats;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde_json::{Value, json};
use tollgate_components::{ComponentHost, ComponentLimits, Grants, Invocation};
use tollgate_plugin_host::{PluginEngine, PluginLimits};

#[derive(Parser)]
#[command(about = "Benchmark a pure tool call: in-process component call against /v1/mcp, same run")]
struct Args {
    /// The tollgate binary to measure (the mock beside it is started too).
    #[arg(long, env = "TOLLGATE_BENCH_BIN", default_value_os_t = default_bin())]
    tollgate_bin: PathBuf,
    /// Calls per path (after 200 unmeasured ones).
    #[arg(long, default_value_t = 5_000)]
    calls: usize,
    /// Concurrent MCP clients for the throughput run.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

fn default_bin() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/tollgate"))
}

const EXPRESSION: &str = "2*(3+4)";

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let in_process = in_process(args.calls).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()?;
    let stack = stack::Stack::start(&args.tollgate_bin, &client, Duration::from_secs(120)).await?;
    let result = async {
        install_calculator(&client, &stack).await?;
        let sequential = mcp(&client, &stack, args.calls, 1).await?;
        let concurrent = mcp(&client, &stack, args.calls * 2, args.concurrency).await?;
        Ok::<_, anyhow::Error>((sequential, concurrent))
    }
    .await;
    stack.shutdown().await;
    let (sequential, concurrent) = result?;

    println!("{:<22} {:>10} {:>10} {:>10}", "path", "p50 µs", "p99 µs", "calls/s");
    for run in [&in_process, &sequential, &concurrent] {
        println!(
            "{:<22} {:>10.1} {:>10.1} {:>10.0}",
            run.name,
            stats::micros(run.p(50.0) as f64),
            stats::micros(run.p(99.0) as f64),
            run.per_second()
        );
    }
    let added = |p: f64| stats::micros(sequential.p(p) as f64 - in_process.p(p) as f64);
    println!(
        "mcp c=1 adds over in-process: p50 {:.1} µs, p99 {:.1} µs",
        added(50.0),
        added(99.0)
    );
    Ok(())
}

struct Run {
    name: String,
    /// Ascending, ns.
    latencies: Vec<u64>,
    elapsed: Duration,
}

impl Run {
    fn p(&self, p: f64) -> u64 {
        stats::percentile(&self.latencies, p)
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

async fn in_process(calls: usize) -> Result<Run> {
    let cache = std::env::temp_dir().join(format!("tollgate-bench-tools-{}", std::process::id()));
    let engine = PluginEngine::new(&PluginLimits::default())?;
    let host = ComponentHost::new(&engine, &cache, ComponentLimits::default())?;
    let bytes = tollgate_plugin_host::builtin_tool_servers()
        .iter()
        .find(|b| b.name == "calculator")
        .context("the calculator is built in")?
        .bytes;
    let server = {
        let host = host.clone();
        tokio::task::spawn_blocking(move || host.load_tool_server("calculator", bytes)).await??
    };
    let grants = Arc::new(Grants::default());
    let invocation = Invocation {
        request_id: "req_bench".into(),
        workspace: "bench".into(),
        install: "calculator".into(),
        depth: 0,
    };
    let arguments = json!({ "expression": EXPRESSION }).to_string();
    let mut latencies = Vec::with_capacity(calls);
    let started = Instant::now();
    for i in 0..calls + 200 {
        let begun = Instant::now();
        let answer = server
            .call(invocation.clone(), grants.clone(), "evaluate", arguments.clone())
            .await
            .map_err(|e| anyhow::anyhow!("in-process call failed: {e}"))?;
        if i >= 200 {
            latencies.push(begun.elapsed().as_nanos() as u64);
        }
        if i == 0 && answer != [tollgate_components::Content::Text("14".into())] {
            bail!("unexpected answer {answer:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
    latencies.sort_unstable();
    Ok(Run {
        name: "in-process".into(),
        latencies,
        elapsed: started.elapsed(),
    })
}

async fn install_calculator(client: &reqwest::Client, stack: &stack::Stack) -> Result<()> {
    let answer: Value = client
        .post(format!("{}/a2a", stack.gateway_url))
        .bearer_auth(&stack.api_key)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "installs/create", "params": {"package": "tollgate/calculator"}}))
        .send()
        .await?
        .json()
        .await?;
    if answer.get("error").is_some() {
        bail!("installing the calculator failed: {answer}");
    }
    Ok(())
}

async fn mcp(client: &reqwest::Client, stack: &stack::Stack, calls: usize, concurrency: usize) -> Result<Run> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "calculator__evaluate", "arguments": {"expression": EXPRESSION}}})
    .to_string();
    let url = format!("{}/v1/mcp", stack.gateway_url);
    let per_worker = calls.div_ceil(concurrency);
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, body, key) = (client.clone(), url.clone(), body.clone(), stack.api_key.clone());
        workers.spawn(async move {
            let mut latencies = Vec::with_capacity(per_worker);
            for i in 0..per_worker + 200 / concurrency {
                let begun = Instant::now();
                let answer: Value = client
                    .post(&url)
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await?
                    .json()
                    .await?;
                if answer["result"]["content"][0]["text"] != "14" {
                    bail!("unexpected MCP answer {answer}");
                }
                if i >= 200 / concurrency {
                    latencies.push(begun.elapsed().as_nanos() as u64);
                }
            }
            Ok::<_, anyhow::Error>(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = workers.join_next().await {
        latencies.extend(done??);
    }
    latencies.sort_unstable();
    Ok(Run {
        name: format!("mcp c={concurrency}"),
        latencies,
        elapsed: started.elapsed(),
    })
}
