//! The floor row (`--floor`): `bench-floor`, a bare relay built from the
//! gateway's own parts, in front of the same mock. Its added latency is what
//! one more loopback hop costs on this machine; the gateway's figures minus
//! the floor's are what the gateway's own work adds.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use reqwest::Client;

use crate::measure::{self, Plan};
use crate::procs::{Managed, TempDir, free_port};
use crate::report::ConfigResult;
use crate::target::Target;

/// Measures the relay beside the direct mock, as one more row.
pub async fn row(
    plan: &Plan,
    client: &Client,
    direct: &Arc<Target>,
    mock_url: &str,
    model: &str,
    stream_words: usize,
    timeout: Duration,
) -> Result<ConfigResult> {
    let dir = TempDir::new("floor")?;
    let bin = relay_bin()?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let mut relay = Managed::spawn(
        "floor relay",
        &bin,
        &["--listen", &addr, "--upstream", mock_url],
        &[],
        &dir.0.join("floor.log"),
    )?;
    let url = format!("http://{addr}");
    // The relay passes /healthz on to the mock.
    relay.wait_healthy(client, &format!("{url}/healthz"), timeout).await?;
    // The mock's own model name: the relay does not route.
    let target = Arc::new(Target::new("floor", &url, None, model, stream_words)?);
    let measured = measure::row(client, plan, direct, &target).await;
    let peak_rss_kib = relay.peak_rss_kib();
    let exited = relay.exited();
    relay.stop().await;
    let (load, stream) = measured?;
    Ok(ConfigResult {
        name: "floor".into(),
        kind: "floor",
        settings: vec!["bare relay (bench-floor)".into()],
        load,
        stream,
        peak_rss_kib,
        exited,
    })
}

/// `bench-floor`, built beside this binary.
fn relay_bin() -> Result<PathBuf> {
    let bin = std::env::current_exe()
        .context("locating tollgate-bench")?
        .with_file_name("bench-floor");
    ensure!(
        bin.is_file(),
        "{} not found: build it with `cargo build --release -p tollgate-bench`",
        bin.display()
    );
    Ok(bin)
}
