//! The optional LiteLLM comparison row: a pinned `litellm[proxy]` from PyPI in
//! a venv of its own, started in front of the same mock and measured like a
//! gateway.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use reqwest::Client;
use tokio::process::Command;

use crate::procs::{Managed, TempDir, free_port};

/// The pin, compiled in so that the binary and the file cannot disagree.
const REQUIREMENTS: &str = include_str!("../litellm-requirements.txt");
/// Copied into the venv after a successful install: the venv is reused while
/// it matches.
const STAMP: &str = "tollgate-bench-requirements.txt";
/// A first install downloads and builds about a hundred packages.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// LiteLLM imports for a while before it listens, longer on a loaded machine.
pub const MIN_STARTUP: Duration = Duration::from_secs(300);
/// The model name LiteLLM serves; it routes it to the mock's `small`.
pub const MODEL: &str = "small";
/// The proxy's master key; with no database configured it is the only key.
pub const MASTER_KEY: &str = "sk-bench-litellm";

/// `1.2.3` from the `litellm[proxy]==1.2.3` line of the requirements.
pub fn version() -> &'static str {
    REQUIREMENTS
        .lines()
        .find_map(|l| l.trim().strip_prefix("litellm[proxy]=="))
        .unwrap_or("unpinned")
}

/// Creates or reuses the venv and returns its `litellm` executable.
pub async fn install(venv: &Path, python: &str) -> Result<PathBuf> {
    let litellm = venv.join("bin/litellm");
    let stamp = venv.join(STAMP);
    if litellm.is_file() && fs::read_to_string(&stamp).is_ok_and(|s| s == REQUIREMENTS) {
        return Ok(litellm);
    }
    if !venv.join("bin/python").is_file() {
        eprintln!("bench: creating {} with {python}", venv.display());
        let what = format!("creating the venv with `{python} -m venv`");
        run(Command::new(python).args(["-m", "venv"]).arg(venv), &what).await?;
    }
    eprintln!(
        "bench: installing litellm[proxy]=={} into {} (first run only; pip's output goes to {})",
        version(),
        venv.display(),
        venv.join("install.log").display()
    );
    // pip reads the pin from a file so that its error messages name it.
    let wanted = venv.join("requirements.txt");
    fs::write(&wanted, REQUIREMENTS)?;
    let log = fs::File::create(venv.join("install.log"))?;
    let mut pip = Command::new(venv.join("bin/pip"));
    pip.args(["install", "--disable-pip-version-check", "-r"])
        .arg(&wanted)
        .stdout(log.try_clone()?)
        .stderr(log);
    let status = tokio::time::timeout(INSTALL_TIMEOUT, pip.kill_on_drop(true).status())
        .await
        .context("pip install timed out")??;
    if !status.success() {
        let log = fs::read_to_string(venv.join("install.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("pip install failed ({status}):\n{}", tail.join("\n"));
    }
    ensure!(litellm.is_file(), "pip succeeded but {} is missing", litellm.display());
    fs::write(&stamp, REQUIREMENTS)?;
    Ok(litellm)
}

async fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| what.to_owned())?;
    ensure!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A LiteLLM proxy serving until dropped.
pub struct Proxy {
    pub url: String,
    proc: Managed,
    _dir: TempDir,
}

impl Proxy {
    pub async fn start(
        litellm: &Path,
        mock_url: &str,
        workers: usize,
        client: &Client,
        timeout: Duration,
    ) -> Result<Self> {
        let dir = TempDir::new("litellm")?;
        let config = dir.0.join("litellm.yaml");
        fs::write(&config, config_yaml(mock_url))?;
        let port = free_port()?.to_string();
        let workers = workers.to_string();
        let config_arg = config.to_string_lossy();
        let args = [
            "--config",
            &config_arg,
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--num_workers",
            &workers,
        ];
        let env = [
            // The cost map ships in the package; nothing outside is reachable.
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            ("LITELLM_LOG", "ERROR"),
        ];
        let log = dir.0.join("litellm.log");
        let mut proc = Managed::spawn("litellm", litellm, &args, &env, &log)?;
        let url = format!("http://127.0.0.1:{port}");
        proc.wait_healthy(client, &format!("{url}/health/liveliness"), timeout)
            .await?;
        Ok(Self { url, proc, _dir: dir })
    }

    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.proc.peak_rss_kib()
    }

    pub fn exited(&mut self) -> Option<String> {
        self.proc.exited()
    }

    pub async fn stop(mut self) {
        self.proc.stop().await;
    }
}

fn config_yaml(mock_url: &str) -> String {
    let base = mock_url.trim_end_matches('/');
    format!(
        r#"model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/small
      api_base: {base}/v1
      api_key: sk-bench
general_settings:
  master_key: {MASTER_KEY}
"#
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pin_is_exact() {
        let v = super::version();
        assert!(
            v.split('.').count() == 3 && v.split('.').all(|p| p.parse::<u32>().is_ok()),
            "{v}"
        );
    }
}
