//! Hosted-actor benchmark: a one-step `llm` actor against the same chat
//! completion sent directly through the gateway, in one run, interleaved in
//! rounds so the machine's noise hits both paths alike. Both pay the same
//! upstream call, wallet hold and settlement; the difference is what the
//! actor runtime adds: resolving the deployment, rendering the prompt,
//! running the step, signing the trail and storing the run.
//!
//! Build and run:
//! `cargo build --release -p tollgate -p tollgate-mock-upstream -p tollgate-bench && target/release/bench-actors`.
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
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Benchmark a one-step llm actor against the same chat completion through the gateway, same run")]
struct Args {
    /// The tollgate binary to measure (the mock beside it is started too).
    #[arg(long, env = "TOLLGATE_BENCH_BIN", default_value_os_t = default_bin())]
    tollgate_bin: PathBuf,
    /// Calls per path (after 100 unmeasured ones each).
    #[arg(long, default_value_t = 2_000)]
    calls: usize,
}

fn default_bin() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/tollgate"))
}

const ACTOR: &str = r#"
apiVersion: tollgate.dev/v1
kind: Actor
metadata: {name: echo, namespace: bench}
inputs:
  type: object
  properties: {name: {type: string}}
  required: [name]
models:
  default: {candidates: [mock/small], max_tokens: 16}
steps:
  - id: greet
    llm: {model: default, prompt: "Say hello to {{ input.name }}."}
  - return: "{{ steps.greet.output }}"
"#;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let client = reqwest::Client::builder().pool_max_idle_per_host(4).build()?;
    let stack = stack::Stack::start(&args.tollgate_bin, &client, Duration::from_secs(120)).await?;
    let result = async {
        deploy(&client, &stack).await?;
        let direct = Path::Direct(json!({
            "model": "mock/small", "max_tokens": 16,
            "messages": [{"role": "user", "content": "Say hello to Ada."}],
        }));
        let actor = Path::Actor(json!({"input": {"name": "Ada"}}));
        let (mut direct_ns, mut actor_ns) = (Vec::new(), Vec::new());
        for _ in 0..100 {
            direct.call(&client, &stack).await?;
            actor.call(&client, &stack).await?;
        }
        // Rounds of 50 each, alternating, so drift affects both paths.
        let started = Instant::now();
        while direct_ns.len() < args.calls {
            for _ in 0..50 {
                direct_ns.push(direct.call(&client, &stack).await?);
            }
            for _ in 0..50 {
                actor_ns.push(actor.call(&client, &stack).await?);
            }
        }
        Ok::<_, anyhow::Error>((direct_ns, actor_ns, started.elapsed()))
    }
    .await;
    stack.shutdown().await;
    let (mut direct_ns, mut actor_ns, elapsed) = result?;
    direct_ns.sort_unstable();
    actor_ns.sort_unstable();
    let p = |v: &[u64], q: f64| stats::micros(stats::percentile(v, q) as f64);
    println!("{:<34} {:>10} {:>10}", "path (c=1)", "p50 µs", "p99 µs");
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "chat completion via gateway",
        p(&direct_ns, 50.0),
        p(&direct_ns, 99.0)
    );
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "one-step llm actor",
        p(&actor_ns, 50.0),
        p(&actor_ns, 99.0)
    );
    println!(
        "actor adds: p50 {:.1} µs, p99 {:.1} µs ({} calls per path in {:.1} s)",
        p(&actor_ns, 50.0) - p(&direct_ns, 50.0),
        p(&actor_ns, 99.0) - p(&direct_ns, 99.0),
        actor_ns.len(),
        elapsed.as_secs_f64()
    );
    Ok(())
}

enum Path {
    Direct(Value),
    Actor(Value),
}

impl Path {
    /// One call; answers its latency in ns after checking the answer.
    async fn call(&self, client: &reqwest::Client, stack: &stack::Stack) -> Result<u64> {
        let (url, body) = match self {
            Path::Direct(body) => (format!("{}/v1/chat/completions", stack.gateway_url), body),
            Path::Actor(body) => (format!("{}/v1/actors/bench/echo", stack.gateway_url), body),
        };
        let begun = Instant::now();
        let response = client.post(&url).bearer_auth(&stack.api_key).json(body).send().await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        let elapsed = begun.elapsed().as_nanos() as u64;
        let text = match self {
            Path::Direct(_) => &answer["choices"][0]["message"]["content"],
            Path::Actor(_) => &answer["output"],
        };
        if !status.is_success() || text != "You said: Say hello to Ada." {
            bail!("unexpected answer ({status}): {answer}");
        }
        Ok(elapsed)
    }
}

async fn op(client: &reqwest::Client, stack: &stack::Stack, method: &str, params: Value) -> Result<Value> {
    let answer: Value = client
        .post(format!("{}/a2a", stack.gateway_url))
        .bearer_auth(&stack.api_key)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await?
        .json()
        .await?;
    if answer.get("error").is_some() {
        bail!("{method} failed: {answer}");
    }
    Ok(answer["result"].clone())
}

async fn deploy(client: &reqwest::Client, stack: &stack::Stack) -> Result<()> {
    op(client, stack, "namespaces/create", json!({"name": "bench"})).await?;
    let published = op(client, stack, "actors/publish", json!({"source": ACTOR})).await?;
    op(
        client,
        stack,
        "deployments/create",
        json!({"namespace": "bench", "name": "echo", "actor_id": published["id"]}),
    )
    .await?;
    Ok(())
}
