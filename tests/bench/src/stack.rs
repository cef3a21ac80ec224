//! The spawned mock (one per run) and gateways (one per configuration, each
//! with a fresh data directory and account).

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use reqwest::Client;
use serde_json::Value;
use tokio::process::Command;

use crate::procs::{Managed, TempDir, free_port};

/// `tollgate-mock-upstream`, serving until dropped.
pub struct Mock {
    pub addr: String,
    pub url: String,
    // Field order is drop order: the process dies before its directory goes.
    proc: Managed,
    _dir: TempDir,
}

impl Mock {
    /// The mock is its own program, built beside the gateway binary.
    pub async fn start(tollgate_bin: &Path, client: &Client, timeout: Duration) -> Result<Self> {
        ensure!(
            tollgate_bin.is_file(),
            "tollgate binary not found at {} (build it with `cargo build --release -p tollgate \
             -p tollgate-mock-upstream`, or pass --tollgate-bin, or use --self-test)",
            tollgate_bin.display()
        );
        let dir = TempDir::new("mock")?;
        let bin = tollgate_bin.with_file_name("tollgate-mock-upstream");
        let addr = format!("127.0.0.1:{}", free_port()?);
        let mut proc = Managed::spawn("mock", &bin, &["--listen", &addr], &[], &dir.0.join("mock.log"))?;
        let url = format!("http://{addr}");
        proc.wait_healthy(client, &format!("{url}/healthz"), timeout).await?;
        Ok(Self {
            addr,
            url,
            proc,
            _dir: dir,
        })
    }

    pub async fn stop(mut self) {
        self.proc.stop().await;
    }
}

/// One gateway in front of the mock, with `env` over the inherited environment.
pub struct Gateway {
    pub url: String,
    pub api_key: String,
    proc: Managed,
    _dir: TempDir,
}

impl Gateway {
    pub async fn start(
        bin: &Path,
        mock_addr: &str,
        env: &[(&str, &str)],
        client: &Client,
        timeout: Duration,
    ) -> Result<Self> {
        let dir = TempDir::new("gateway")?;
        let data = dir.0.join("data");
        fs::create_dir_all(&data)?;
        let addr = format!("127.0.0.1:{}", free_port()?);
        let config = dir.0.join("tollgate.toml");
        fs::write(&config, config_toml(&addr, &data, mock_addr))?;
        let api_key = create_account(bin, &config, env, timeout).await?;

        let config_arg = config.to_string_lossy();
        let mut proc = Managed::spawn(
            "gateway",
            bin,
            &["serve", "--config", &config_arg],
            env,
            &dir.0.join("gateway.log"),
        )?;
        let url = format!("http://{addr}");
        proc.wait_healthy(client, &format!("{url}/healthz"), timeout).await?;
        Ok(Self {
            url,
            api_key,
            proc,
            _dir: dir,
        })
    }

    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.proc.peak_rss_kib()
    }

    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }

    /// The gateway's `data_dir` (database, event files).
    pub fn data_dir(&self) -> std::path::PathBuf {
        self._dir.0.join("data")
    }

    pub fn exited(&mut self) -> Option<String> {
        self.proc.exited()
    }

    pub async fn stop(mut self) {
        self.proc.stop().await;
    }
}

fn config_toml(listen: &str, data_dir: &Path, mock_addr: &str) -> String {
    format!(
        r#"listen = "{listen}"
data_dir = "{data_dir}"

[providers.mock]
adapter = "openai-compatible"
base_url = "http://{mock_addr}/v1"
api_key = "sk-bench"

[[providers.mock.models]]
id = "small"
input_price_per_mtok = "0.50"
output_price_per_mtok = "1.50"
context_length = 128000

# A second provider on the same mock, and a group over both: `--gateway-model
# bench` measures a request that routing chooses for (docs/routing.md).
[providers.mock2]
adapter = "openai-compatible"
base_url = "http://{mock_addr}/v1"
api_key = "sk-bench"
models = [{{ id = "small", input_price_per_mtok = "0.60", output_price_per_mtok = "1.50", context_length = 128000 }}]

[routing.groups.bench]
deployments = [{{ model = "mock/small" }}, {{ model = "mock2/small" }}]

# The bench sends far more than Free's 1,000 requests a month from one
# workspace: its plan here has no monthly limit (docs/billing.md).
[billing.plans.free]
"#,
        data_dir = data_dir.display()
    )
}

/// Runs `tollgate admin create-account … --json` and returns the API key.
async fn create_account(bin: &Path, config: &Path, env: &[(&str, &str)], timeout: Duration) -> Result<String> {
    let mut cmd = Command::new(bin);
    cmd.args(["admin", "create-account", "--config"])
        .arg(config)
        .args(["--name", "bench", "--credit-usd", "1000000", "--json"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .context("`tollgate admin create-account` timed out")?
        .context("running `tollgate admin create-account`")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "`tollgate admin create-account` failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The contract is one JSON object on stdout; tolerate stray log lines.
    let account: Value = serde_json::from_str(stdout.trim())
        .ok()
        .or_else(|| stdout.lines().rev().find_map(|l| serde_json::from_str(l).ok()))
        .with_context(|| format!("no JSON object in create-account output:\n{stdout}"))?;
    let key = account["api_key"]
        .as_str()
        .with_context(|| format!("create-account output has no api_key: {account}"))?;
    Ok(key.to_owned())
}

/// The mock and one gateway as shipped, for `bench-actors` and `bench-tools`
/// (which include this file; `tollgate-bench` itself starts them apart).
#[allow(dead_code)]
pub struct Stack {
    pub gateway_url: String,
    pub api_key: String,
    // Field order is drop order: the gateway dies before its upstream.
    gateway: Gateway,
    mock: Mock,
}

#[allow(dead_code)]
impl Stack {
    pub async fn start(bin: &Path, client: &Client, timeout: Duration) -> Result<Self> {
        let mock = Mock::start(bin, client, timeout).await?;
        let gateway = Gateway::start(bin, &mock.addr, &[], client, timeout).await?;
        Ok(Self {
            gateway_url: gateway.url.clone(),
            api_key: gateway.api_key.clone(),
            gateway,
            mock,
        })
    }

    /// Kills and reaps both children.
    pub async fn shutdown(self) {
        self.gateway.stop().await;
        self.mock.stop().await;
    }
}
