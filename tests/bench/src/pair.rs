//! `tollgate-bench pair`: what one feature adds to a request, as the gap
//! between two requests sent alternately, one at a time, to the same gateway
//! (and the direct mock beside them). Separate runs of a configuration drift
//! by tens of microseconds on a small machine, more than a feature costs;
//! alternating request by request puts both sides under the same drift, so a
//! gap of a few microseconds shows. The order within each round flips, so
//! neither side always follows the other.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use clap::{Parser, ValueEnum};
use reqwest::Client;
use serde::Serialize;

use crate::stack::{Gateway, Mock};
use crate::stats::{mean, micros, percentile};
use crate::target::{self, Target};

const MAX_PAIR_SECS: u64 = 600;

#[derive(Parser)]
#[command(
    name = "tollgate-bench pair",
    about = "What a feature adds at c=1: two requests sent alternately to one gateway, and the gap between them"
)]
pub struct Args {
    /// The tollgate binary (the mock is the `tollgate-mock-upstream` beside it).
    #[arg(long, env = "TOLLGATE_BENCH_BIN", default_value_os_t = crate::workspace_path("target/release/tollgate"))]
    tollgate_bin: PathBuf,
    /// The pairs to measure, each on a fresh gateway (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "control,routing,guarded")]
    pairs: Vec<Pair>,
    /// Measured time per pair.
    #[arg(long, default_value_t = 20)]
    duration_secs: u64,
    /// Unmeasured alternation before each pair's measurement.
    #[arg(long, default_value_t = 2)]
    warmup_secs: u64,
    /// The registry package of the `guarded` pair's guardrail. The default,
    /// `tollgate/denylist` with nothing to deny, is a no-op guardrail: it
    /// reads its settings and allows.
    #[arg(long, default_value = "tollgate/denylist")]
    guardrail: String,
    /// The `provider` preferences the `routing` pair's second side sends.
    #[arg(
        long,
        default_value = r#"{"sort":"price","max_price":{"prompt":10,"completion":10}}"#
    )]
    preferences: String,
    /// How long the mock and each gateway may take to become healthy.
    #[arg(long, default_value_t = 120)]
    startup_timeout_secs: u64,
    /// Write the JSON results here as well.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pair {
    /// No feature: `mock2/small` against `mock/small` on a default gateway.
    /// The gap the `guarded` pair's two models have without it.
    Control,
    /// Provider preferences (`sort`, `max_price`) against the same request
    /// without them, on a default gateway.
    Routing,
    /// `mock/small` behind one guardrail and an exact-cache lookup that
    /// misses (nothing is kept: `max_entry_kib = 0`), against `mock2/small`
    /// with neither (no guardrail placed on it, `Cache-Control: no-store`).
    Guarded,
    /// The `guarded` pair's guardrail alone (no cache).
    GuardrailOnly,
    /// The `guarded` pair's cache lookup alone: `mock/small` against itself
    /// with `Cache-Control: no-store`.
    CacheMissOnly,
}

impl Pair {
    fn env(self, guardrail: &str) -> Vec<(String, String)> {
        match self {
            Pair::Control | Pair::Routing => Vec::new(),
            Pair::Guarded => [guard(guardrail), cache_that_misses()].concat(),
            Pair::GuardrailOnly => guard(guardrail),
            Pair::CacheMissOnly => cache_that_misses(),
        }
    }

    /// The two sides: without the feature, then with it.
    fn sides(self, gateway: &Gateway, preferences: &str) -> Result<(Target, Target)> {
        let key = Some(gateway.api_key.as_str());
        let side = |name, model| Target::new(name, &gateway.url, key, model, 1);
        Ok(match self {
            Pair::Control => (side("without", "mock2/small")?, side("with", "mock/small")?),
            Pair::Routing => (
                side("without", "mock/small")?,
                side("with", "mock/small")?.with_provider(preferences)?,
            ),
            Pair::Guarded | Pair::GuardrailOnly => (
                side("without", "mock2/small")?.with_header("cache-control", "no-store"),
                side("with", "mock/small")?,
            ),
            Pair::CacheMissOnly => (
                side("without", "mock/small")?.with_header("cache-control", "no-store"),
                side("with", "mock/small")?,
            ),
        })
    }
}

/// One operator guardrail on `mock/small` only, checking requests only.
fn guard(package: &str) -> Vec<(String, String)> {
    vec![(
        "TOLLGATE_GUARDRAILS__OPERATOR".into(),
        format!(r#"[{{name="bench",package="{package}",models=["mock/small"],checks=["requests"]}}]"#),
    )]
}

/// The response cache on, keeping nothing, so every lookup misses.
fn cache_that_misses() -> Vec<(String, String)> {
    vec![
        ("TOLLGATE_CACHE__ENABLED".into(), "true".into()),
        ("TOLLGATE_CACHE__MAX_ENTRY_KIB".into(), "0".into()),
    ]
}

#[derive(Serialize)]
struct Side {
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
}

impl Side {
    fn of(sorted: &[u64]) -> Self {
        Side {
            p50_us: micros(percentile(sorted, 50.0) as f64),
            p99_us: micros(percentile(sorted, 99.0) as f64),
            mean_us: micros(mean(sorted)),
        }
    }
}

#[derive(Serialize)]
struct PairReport {
    pair: Pair,
    settings: Vec<String>,
    rounds: usize,
    errors: u64,
    /// Rounds (one request to each of the three) per second.
    rounds_per_sec: f64,
    direct: Side,
    without: Side,
    with: Side,
    /// p50(with) − p50(without).
    added_p50_us: f64,
    /// The median of each round's with − without.
    added_median_of_rounds_us: f64,
}

pub async fn run(args: Args) -> Result<()> {
    ensure!(!args.pairs.is_empty(), "--pairs needs at least one pair");
    ensure!(
        args.duration_secs <= MAX_PAIR_SECS && args.warmup_secs <= MAX_PAIR_SECS,
        "durations are capped at {MAX_PAIR_SECS} s"
    );
    let client = target::client(1)?;
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    let mock = Mock::start(&args.tollgate_bin, &client, timeout).await?;
    let mut reports = Vec::new();
    for &pair in &args.pairs {
        eprintln!("bench: pair {pair:?}");
        let env = pair.env(&args.guardrail);
        let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let gateway = Gateway::start(&args.tollgate_bin, &mock.addr, &env_refs, &client, timeout).await?;
        let (without, with) = pair.sides(&gateway, &args.preferences)?;
        let targets = [
            Arc::new(Target::new("direct", &mock.url, None, "small", 1)?),
            Arc::new(without),
            Arc::new(with),
        ];
        for t in &targets {
            t.check(&client).await?;
        }
        alternate(&client, &targets, Duration::from_secs(args.warmup_secs)).await?;
        let run = alternate(&client, &targets, Duration::from_secs(args.duration_secs)).await?;
        gateway.stop().await;
        let report = run.report(pair, env.iter().map(|(k, v)| format!("{k}={v}")).collect());
        eprintln!(
            "bench:   direct p50 {} µs · without p50 {} µs p99 {} µs · with p50 {} µs p99 {} µs · added p50 {:+} µs (median of rounds {:+} µs) over {} rounds",
            report.direct.p50_us,
            report.without.p50_us,
            report.without.p99_us,
            report.with.p50_us,
            report.with.p99_us,
            report.added_p50_us,
            report.added_median_of_rounds_us,
            report.rounds
        );
        reports.push(report);
    }
    mock.stop().await;
    let json = serde_json::to_string_pretty(&reports)?;
    match &args.json {
        Some(path) => {
            std::fs::write(path, json + "\n")?;
            eprintln!("bench: results written to {}", path.display());
        }
        None => println!("{json}"),
    }
    Ok(())
}

struct Alternated {
    /// Latencies in ns: direct, without, with; index `i` of each is round `i`.
    latencies: [Vec<u64>; 3],
    errors: u64,
    elapsed: Duration,
}

/// Sends one request to each target per round, one at a time, flipping the
/// order of the two gateway sides every round, until `duration` has passed.
/// A round with a failed request is dropped whole, so rounds stay paired.
async fn alternate(client: &Client, targets: &[Arc<Target>; 3], duration: Duration) -> Result<Alternated> {
    let start = Instant::now();
    let mut run = Alternated {
        latencies: Default::default(),
        errors: 0,
        elapsed: Duration::ZERO,
    };
    let mut round = 0usize;
    while start.elapsed() < duration {
        let order: [usize; 3] = if round.is_multiple_of(2) { [0, 1, 2] } else { [0, 2, 1] };
        let mut took = [0u64; 3];
        let mut failed = false;
        for i in order {
            match send(client, &targets[i]).await {
                Some(ns) => took[i] = ns,
                None => failed = true,
            }
        }
        round += 1;
        if failed {
            run.errors += 1;
            if run.errors > 100 && run.errors * 10 > round as u64 {
                bail!("more than one round in ten failed; is the gateway healthy?");
            }
            continue;
        }
        for (i, ns) in took.into_iter().enumerate() {
            run.latencies[i].push(ns);
        }
    }
    run.elapsed = start.elapsed();
    Ok(run)
}

async fn send(client: &Client, target: &Target) -> Option<u64> {
    let sent = Instant::now();
    let resp = target.request(client, &target.body).send().await.ok()?;
    let success = resp.status().is_success();
    (resp.bytes().await.is_ok() && success).then(|| sent.elapsed().as_nanos() as u64)
}

impl Alternated {
    fn report(self, pair: Pair, settings: Vec<String>) -> PairReport {
        let rounds = self.latencies[0].len();
        let mut gaps: Vec<i64> = self.latencies[2]
            .iter()
            .zip(&self.latencies[1])
            .map(|(&with, &without)| with as i64 - without as i64)
            .collect();
        gaps.sort_unstable();
        let median_gap = gaps.get(gaps.len() / 2).copied().unwrap_or(0);
        let [mut direct, mut without, mut with] = self.latencies;
        for side in [&mut direct, &mut without, &mut with] {
            side.sort_unstable();
        }
        let (without, with) = (Side::of(&without), Side::of(&with));
        PairReport {
            pair,
            settings,
            rounds,
            errors: self.errors,
            rounds_per_sec: rounds as f64 / self.elapsed.as_secs_f64().max(1e-9),
            direct: Side::of(&direct),
            added_p50_us: ((with.p50_us - without.p50_us) * 10.0).round() / 10.0,
            added_median_of_rounds_us: micros(median_gap as f64),
            without,
            with,
        }
    }
}
