//! Test harness: starts the in-process mock upstream and the real `tollgate`
//! binary on free ports with a temporary data directory, and creates an account.

#![allow(dead_code)]

pub mod db_proxy;
pub mod nats;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_tollgate");
pub const MISBEHAVING_WASM: &str = tollgate_plugin_host::MISBEHAVING_TEST_COMPONENT;

/// Chat requests the mock has received since it started.
pub async fn mock_chat_requests(mock: SocketAddr) -> u64 {
    let stats: Value = reqwest::get(format!("http://{mock}/__mock/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    stats["chat_requests"].as_u64().unwrap()
}

/// A running mock upstream in this test's runtime.
pub async fn start_mock(options: tollgate_mock_upstream::MockOptions) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(tollgate_mock_upstream::serve(listener, options));
    address
}

/// The API requests `mock` received (its `/__mock/requests` recorder), oldest
/// first: `{"method","path","headers","body"}`.
pub async fn mock_requests(mock: SocketAddr) -> Vec<serde_json::Value> {
    reqwest::get(format!("http://{mock}/__mock/requests"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub struct Gateway {
    pub url: String,
    pub api_key: String,
    pub workspace_id: String,
    pub dir: Arc<tempfile::TempDir>,
    pub config_path: PathBuf,
    /// Extra environment of the gateway process (and of `another()`).
    env: Vec<(String, String)>,
    child: Child,
    pub http: reqwest::Client,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Shared across tests so each gateway start does not recompile the adapters.
fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tollgate-component-cache")
}

/// The standard test config: provider `mock` (OpenAI-compatible, priced
/// 0.50/1.50 USD per Mtok) and provider `bad` served by the misbehaving adapter.
pub fn standard_config(mock: SocketAddr, extra: &str) -> String {
    format!(
        r#"
[providers.mock]
adapter = "openai-compatible"
base_url = "http://{mock}/v1"
api_key = "sk-test-upstream"
[[providers.mock.models]]
id = "small"
input_price_per_mtok = "0.50"
output_price_per_mtok = "1.50"
context_length = 128000
[[providers.mock.models]]
id = "renamed"
upstream = "large"
input_price_per_mtok = "3"
output_price_per_mtok = "15"

[adapters.misbehaving]
path = "{wasm}"

[providers.bad]
adapter = "misbehaving"
base_url = "http://{mock}/v1"
api_key = "sk-test-upstream"
models = [
  {{ id = "trap", input_price_per_mtok = "1", output_price_per_mtok = "1" }},
  {{ id = "loop", input_price_per_mtok = "1", output_price_per_mtok = "1" }},
  {{ id = "oom", input_price_per_mtok = "1", output_price_per_mtok = "1" }},
  {{ id = "trap-stream", input_price_per_mtok = "1", output_price_per_mtok = "1" }},
  {{ id = "fine", input_price_per_mtok = "1", output_price_per_mtok = "1" }},
  {{ id = "scavenge", input_price_per_mtok = "1", output_price_per_mtok = "1" }},
]
{extra}
"#,
        wasm = MISBEHAVING_WASM
    )
}

impl Gateway {
    /// A gateway with a fresh data dir and an account holding 100 USD.
    pub async fn start(config_body: &str) -> Gateway {
        Self::start_with(config_body, "100").await
    }

    /// A gateway with a fresh data dir and an account holding `credit_usd`.
    /// `config_body` may set `database_url` to use another database.
    pub async fn start_with(config_body: &str, credit_usd: &str) -> Gateway {
        Self::start_with_env(config_body, credit_usd, &[]).await
    }

    /// Like [`Gateway::start_with`], the gateway process with `env` added.
    pub async fn start_with_env(config_body: &str, credit_usd: &str, env: &[(&str, &str)]) -> Gateway {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let config_path = dir.path().join("tollgate.toml");
        let config = format!(
            "data_dir = \"{}\"\ncache_dir = \"{}\"\n{config_body}",
            dir.path().join("data").display(),
            cache_dir().display()
        );
        std::fs::write(&config_path, config).unwrap();
        let created = admin(
            &config_path,
            &["create-account", "--name", "test", "--credit-usd", credit_usd, "--json"],
        );
        let created: Value = serde_json::from_str(&created).unwrap();
        Self::launch(
            dir,
            config_path,
            created["api_key"].as_str().unwrap().to_string(),
            created["workspace_id"].as_str().unwrap().to_string(),
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        )
        .await
    }

    /// Another gateway process with the same configuration (and so the same
    /// database) on its own port, with a ledger journal of its own.
    pub async fn another(&self) -> Gateway {
        let journal = self
            .dir
            .path()
            .join(format!("journal-{}", uuid::Uuid::now_v7().simple()));
        self.launch_beside([("TOLLGATE_LEDGER__JOURNAL_DIR", journal)]).await
    }

    /// This gateway started again after it stopped: the same data directory,
    /// so the same ledger journal.
    pub async fn restart(&self) -> Gateway {
        self.launch_beside::<0>([]).await
    }

    /// Another gateway on the same database, as on another host: its own
    /// data directory (so its own blob store and caches), sharing only what
    /// an operator shares between hosts, the database and the key files.
    pub async fn another_host(&self, name: &str) -> Gateway {
        let data = self.dir.path().join("data");
        self.launch_beside([
            ("TOLLGATE_DATA_DIR", self.dir.path().join(name)),
            ("TOLLGATE_CREDENTIAL_KEY_FILE", data.join("credentials.key")),
            ("TOLLGATE_PROVENANCE_KEY_FILE", data.join("provenance.key")),
        ])
        .await
    }

    /// A gateway with this one's configuration and environment, plus `paths`.
    async fn launch_beside<const N: usize>(&self, paths: [(&str, PathBuf); N]) -> Gateway {
        let mut env = self.env.clone();
        env.extend(paths.map(|(name, path)| (name.to_string(), path.display().to_string())));
        Self::launch(
            self.dir.clone(),
            self.config_path.clone(),
            self.api_key.clone(),
            self.workspace_id.clone(),
            env,
        )
        .await
    }

    async fn launch(
        dir: Arc<tempfile::TempDir>,
        config_path: PathBuf,
        api_key: String,
        workspace_id: String,
        env: Vec<(String, String)>,
    ) -> Gateway {
        let port = free_port();
        let child = Command::new(BIN)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--config"])
            .arg(&config_path)
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let gateway = Gateway {
            url: format!("http://127.0.0.1:{port}"),
            api_key,
            workspace_id,
            dir,
            config_path,
            env,
            child,
            http: reqwest::Client::builder().pool_max_idle_per_host(512).build().unwrap(),
        };
        gateway.wait_healthy().await;
        gateway
    }

    /// The gateway process's id (for /proc/<pid>/status).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the process abruptly (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for the gateway to shut down gracefully.
    pub fn terminate(&mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "graceful shutdown exits 0, got {exit}");
    }

    /// Sends SIGTERM without waiting: the gateway starts its graceful shutdown.
    pub fn signal_term(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits up to `within` for the process to exit, and returns how it did.
    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the gateway did not exit within {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The `host:port` the gateway listens on, for raw sockets.
    pub fn address(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// Sends SIGHUP: the gateway reloads its configuration.
    pub fn hangup(&self) {
        let status = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Runs `tollgate admin …` against this gateway's configuration.
    pub fn admin(&self, args: &[&str]) -> String {
        admin(&self.config_path, args)
    }

    /// `GET /v1/models/{id}` as JSON.
    pub async fn model(&self, id: &str) -> Value {
        self.get(&format!("/v1/models/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `admin wallet --json` for this gateway's workspace.
    pub fn wallet(&self) -> Value {
        serde_json::from_str(&self.admin(&["wallet", "--workspace", &self.workspace_id, "--json"])).unwrap()
    }

    /// The wallet once no hold is pending (or as it stands after 10 s). A
    /// hold's release reaches the wallet's row with the ledger writer's next
    /// commit, which an answer does not wait for: a read right after the
    /// answer may still show the hold.
    pub async fn settled_wallet(&self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let wallet = self.wallet();
            if wallet["pending_usd"] == "0.000000000" || Instant::now() >= deadline {
                return wallet;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(r) = self.http.get(format!("{}/healthz", self.url)).send().await
                && r.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("gateway did not become healthy at {}", self.url);
    }

    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(format!("{}{path}", self.url)).bearer_auth(&self.api_key)
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.url)).bearer_auth(&self.api_key)
    }

    /// POSTs a chat request and returns (status, headers, JSON body).
    pub async fn chat(&self, body: Value) -> (u16, reqwest::header::HeaderMap, Value) {
        let response = self.post("/v1/chat/completions").json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text}"));
        (status, headers, json)
    }

    /// POSTs a streaming chat request and returns the `data:` payloads in order.
    pub async fn chat_stream(&self, body: Value) -> (u16, Vec<String>) {
        let response = self.post("/v1/chat/completions").json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let frames = text
            .split("\n\n")
            .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")).map(str::to_string))
            .collect();
        (status, frames)
    }

    /// A plain request that must succeed: the gateway is still serving.
    pub async fn assert_still_serving(&self) {
        let (status, _, body) = self
            .chat(serde_json::json!({"model": "mock/small", "messages": [{"role": "user", "content": "still there?"}]}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
}

/// Asserts the OpenAI error shape and returns the error object.
pub fn assert_error_shape(body: &Value) -> &Value {
    let error = &body["error"];
    assert!(error["message"].is_string(), "error.message missing: {body}");
    assert!(error["type"].is_string(), "error.type missing: {body}");
    assert!(error.get("code").is_some(), "error.code missing: {body}");
    assert!(error.get("param").is_some(), "error.param missing: {body}");
    assert!(
        body["service"]["request_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("req_")),
        "service.request_id missing: {body}"
    );
    error
}

/// Runs `tollgate admin ARGS --config CONFIG`, asserting success; returns stdout.
pub fn admin(config_path: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(BIN)
        .arg("admin")
        .args(args)
        .arg("--config")
        .arg(config_path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "tollgate admin {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Parses an exact USD decimal string ("0.000013000") into nano-USD.
pub fn nanos(usd: &str) -> i64 {
    let (whole, frac) = usd.split_once('.').unwrap_or((usd, ""));
    let frac = format!("{frac:0<9}");
    whole.parse::<i64>().unwrap() * 1_000_000_000 + frac[..9].parse::<i64>().unwrap()
}

/// A fresh Postgres schema on the machine's server, dropped when the guard is.
/// Returns `None` (the test then skips, saying why) when no server answers,
/// unless running in CI, where Postgres must be there.
pub struct PgSchema {
    pub url: String,
    admin_url: String,
    name: String,
}

pub const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

impl PgSchema {
    pub async fn create() -> Option<PgSchema> {
        sqlx::any::install_default_drivers();
        let admin_url = std::env::var("TG_TEST_POSTGRES_URL").unwrap_or_else(|_| PG_ADMIN_URL.to_string());
        let pool = match sqlx::AnyPool::connect(&admin_url).await {
            Ok(pool) => pool,
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("SKIPPED: no Postgres at {admin_url} ({e}); CI runs this test against a real server");
                return None;
            }
            Err(e) => panic!("Postgres at {admin_url} is required in CI: {e}"),
        };
        let name = format!("tg_test_{}", uuid::Uuid::now_v7().simple());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        let url = format!("{admin_url}?options=-c%20search_path%3D{name}");
        Some(PgSchema { url, admin_url, name })
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                &self.admin_url,
                "-q",
                "-c",
                &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
