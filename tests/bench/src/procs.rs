//! Child processes of the `tollgate` binary (mock and gateway): spawning,
//! health waits, account creation and cleanup. Children are killed when their
//! handle drops, so an error or an interrupt anywhere cannot leak them.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use reqwest::Client;
use serde_json::Value;
use tokio::process::{Child, Command};

/// The mock and the gateway, spawned and healthy.
pub struct Stack {
    pub mock_url: String,
    pub gateway_url: String,
    pub api_key: String,
    // Field order is drop order: processes die before their directory goes.
    gateway: Managed,
    mock: Managed,
    _dir: TempDir,
}

impl Stack {
    pub async fn start(bin: &Path, client: &Client, startup_timeout: Duration) -> Result<Self> {
        ensure!(
            bin.is_file(),
            "tollgate binary not found at {} (build it with `cargo build --release -p tollgate`, \
             or pass --tollgate-bin, or use --self-test)",
            bin.display()
        );
        let dir = TempDir::new()?;

        let mock_addr = format!("127.0.0.1:{}", free_port()?);
        // The fake provider is its own program, built beside the gateway.
        let mock_bin = bin.with_file_name("tollgate-mock-upstream");
        let mut mock = Managed::spawn("mock", &mock_bin, &["--listen", &mock_addr], &dir.0.join("mock.log"))?;
        let mock_url = format!("http://{mock_addr}");
        mock.wait_healthy(client, &mock_url, startup_timeout).await?;

        let gateway_addr = format!("127.0.0.1:{}", free_port()?);
        let config = dir.0.join("tollgate.toml");
        fs::write(&config, config_toml(&gateway_addr, &dir.0.join("data"), &mock_addr))?;
        let api_key = create_account(bin, &config, startup_timeout).await?;

        let config_arg = config.to_string_lossy();
        let mut gateway = Managed::spawn(
            "gateway",
            bin,
            &["serve", "--config", &config_arg],
            &dir.0.join("gateway.log"),
        )?;
        let gateway_url = format!("http://{gateway_addr}");
        gateway.wait_healthy(client, &gateway_url, startup_timeout).await?;

        Ok(Self {
            mock_url,
            gateway_url,
            api_key,
            gateway,
            mock,
            _dir: dir,
        })
    }

    pub fn gateway_pid(&self) -> Option<u32> {
        self.gateway.child.id()
    }

    /// Kills and reaps both children (dropping would only kill them).
    pub async fn shutdown(mut self) {
        self.gateway.stop().await;
        self.mock.stop().await;
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
"#,
        data_dir = data_dir.display()
    )
}

/// Runs `tollgate admin create-account … --json` and returns the API key.
async fn create_account(bin: &Path, config: &Path, timeout: Duration) -> Result<String> {
    let mut cmd = Command::new(bin);
    cmd.args(["admin", "create-account", "--config"])
        .arg(config)
        .args(["--name", "bench", "--credit-usd", "1000000", "--json"])
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
    eprintln!("bench: account created (workspace {})", account["workspace_id"]);
    Ok(key.to_owned())
}

struct Managed {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Managed {
    fn spawn(name: &'static str, bin: &Path, args: &[&str], log: &Path) -> Result<Self> {
        let out = File::create(log)?;
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {name}: {} {}", bin.display(), args.join(" ")))?;
        Ok(Self {
            name,
            child,
            log: log.to_owned(),
        })
    }

    async fn wait_healthy(&mut self, client: &Client, base: &str, timeout: Duration) -> Result<()> {
        let url = format!("{base}/healthz");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited ({status}) before becoming healthy; log:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            let probe = client.get(&url).timeout(Duration::from_secs(1)).send().await;
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
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// A port the OS considers free now. Another process could take it before
/// the child binds it; on loopback in a bench run that race is negligible.
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Peak resident set size (VmHWM) of a live process, in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A scratch directory for the config, data and logs, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos();
        let path = std::env::temp_dir().join(format!("tollgate-bench-{}-{nanos}", std::process::id()));
        fs::create_dir_all(path.join("data"))?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
