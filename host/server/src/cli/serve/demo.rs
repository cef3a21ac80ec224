//! The demo provider of `serve --demo`: the fake provider (the
//! `tollgate-mock-upstream` crate) served in-process on a loopback port, and
//! the `[providers.demo]` entry that points the gateway at it with a few
//! priced models. It answers `You said: …` and counts tokens by words, so
//! costs are real, small and predictable. Nothing leaves the machine.

use std::net::SocketAddr;

use crate::config::Config;

/// The demo's models: id, USD per million input and output tokens, context,
/// maximum output (what a request without a limit is held and capped at).
const MODELS: [(&str, &str, &str, u64, u64); 3] = [
    ("small", "0.50", "1.50", 128_000, 32_000),
    ("medium", "3.00", "15.00", 200_000, 32_000),
    ("large", "15.00", "75.00", 200_000, 32_000),
];

pub const PROVIDER: &str = "demo";

#[derive(Clone)]
pub struct DemoProvider {
    address: SocketAddr,
}

impl DemoProvider {
    /// Serves the fake provider on an ephemeral loopback port for as long as
    /// the process runs.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let options = tollgate_mock_upstream::MockOptions {
            latency_ms: 0,
            require_api_key: Some("demo".into()),
            ..Default::default()
        };
        tokio::spawn(async move {
            if let Err(e) = tollgate_mock_upstream::serve(listener, options).await {
                tracing::error!(error = %e, "the demo provider stopped");
            }
        });
        Ok(Self { address })
    }

    /// Adds `[providers.demo]` to `config`, unless the configuration already
    /// defines a provider of that name.
    pub fn add_to(&self, config: &mut Config) -> anyhow::Result<()> {
        if config.providers.contains_key(PROVIDER) {
            tracing::warn!("[providers.demo] is configured; the demo provider is not added");
            return Ok(());
        }
        let models: Vec<serde_json::Value> = MODELS
            .iter()
            .map(|(id, input, output, context, max_output)| {
                serde_json::json!({
                    "id": id,
                    "input_price_per_mtok": input,
                    "output_price_per_mtok": output,
                    "context_length": context,
                    "max_output_tokens": max_output,
                })
            })
            .collect();
        let provider = serde_json::json!({
            "name": "Demo (in-process)",
            "adapter": "openai-compatible",
            "base_url": format!("http://{}/v1", self.address),
            "api_key": "demo",
            "models": models,
        });
        config
            .providers
            .insert(PROVIDER.into(), serde_json::from_value(provider)?);
        Ok(())
    }
}
