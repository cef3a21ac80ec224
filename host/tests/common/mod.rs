//! Test harness: starts the in-process mock upstream and the real `tollgate`
//! binary on free ports with a temporary data directory, and creates an account.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_tollgate");
pub const MISBEHAVING_WASM: &str = env!("TG_TEST_MISBEHAVING_WASM");

/// A running mock upstream in this test's runtime.
pub async fn start_mock(options: tollgate_mock_upstream::MockOptions) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(tollgate_mock_upstream::serve(listener, options));
    address
}

pub struct Gateway {
    pub url: String,
    pub api_key: String,
    pub workspace_id: String,
    pub dir: tempfile::TempDir,
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
]
{extra}
"#,
        wasm = MISBEHAVING_WASM
    )
}

impl Gateway {
    pub async fn start(config_body: &str) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = format!(
            "listen = \"127.0.0.1:{port}\"\ndata_dir = \"{}\"\ncache_dir = \"{}\"\n{config_body}",
            dir.path().join("data").display(),
            cache_dir().display()
        );
        let config_path = dir.path().join("tollgate.toml");
        std::fs::write(&config_path, config).unwrap();

        let output = Command::new(BIN)
            .args([
                "admin",
                "create-account",
                "--name",
                "test",
                "--credit-usd",
                "100",
                "--json",
                "--config",
            ])
            .arg(&config_path)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "create-account failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let created: Value = serde_json::from_slice(&output.stdout).unwrap();

        let child = Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&config_path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let gateway = Gateway {
            url: format!("http://127.0.0.1:{port}"),
            api_key: created["api_key"].as_str().unwrap().to_string(),
            workspace_id: created["workspace_id"].as_str().unwrap().to_string(),
            dir,
            child,
            http: reqwest::Client::new(),
        };
        gateway.wait_healthy().await;
        gateway
    }

    async fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(r) = self.http.get(format!("{}/healthz", self.url)).send().await {
                if r.status().is_success() {
                    return;
                }
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
