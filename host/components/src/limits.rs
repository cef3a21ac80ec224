//! What one component call may use: memory, guest compute, wall time, output,
//! outbound HTTP (and where it may go), log lines, model calls and nesting. Configured
//! under `[components]`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ComponentLimits {
    /// Linear memory per call, in MiB. At most `plugins.memory_mib`, the size
    /// of the engine's instance slots.
    pub memory_mib: usize,
    /// Guest compute per call, in ms. Time the guest spends waiting on the host
    /// (HTTP, model and tool calls) does not count.
    pub cpu_ms: u64,
    /// Wall time per call, in ms, host calls included.
    pub wall_ms: u64,
    /// Largest answer one call may return, in bytes.
    pub max_output_bytes: usize,
    /// How long a tool's question to the MCP client's user (tool WIT 0.3.0's
    /// `elicitation`) waits for the answer, in ms. The wait is not counted in
    /// `wall_ms`; past this the question fails as `timed-out`.
    pub elicitation_timeout_ms: u64,
    /// Questions one workspace may have waiting for an answer on one gateway
    /// at a time. Each waiting question holds its call's sandbox slot and a
    /// blocking thread until it is answered or times out, so without a cap a
    /// tenant that never answers could take them from every other tenant;
    /// past it, a question fails at once as `unavailable`.
    pub max_waiting_elicitations: u32,
    /// Timeout of one outbound HTTP request, in ms (never past the wall time).
    pub http_timeout_ms: u64,
    /// Largest outbound request or response body, in bytes.
    pub http_max_body_bytes: usize,
    /// Log lines one call may write; later ones are dropped.
    pub max_log_lines: u32,
    /// How deep tool calls may nest (a skill calling a tool is depth 1).
    pub max_depth: u32,
    /// Model calls one call may make through the `models` capability (a
    /// skill's, a 0.4.0 tool server's, a guardrail's); later ones are refused
    /// (429 `model_call_limit`) without reaching the pipeline, so a
    /// component cannot spend its caller's wallet without end.
    pub max_model_calls: u32,
    /// Origins (`scheme://host[:port]`) components may reach although they
    /// are loopback, private, link-local or otherwise internal. Empty by
    /// default: no component reaches the gateway's own network.
    pub allow_internal_origins: Vec<String>,
}

impl Default for ComponentLimits {
    fn default() -> Self {
        Self {
            memory_mib: 64,
            cpu_ms: 1_000,
            wall_ms: 30_000,
            max_output_bytes: 1 << 20,
            elicitation_timeout_ms: 120_000,
            max_waiting_elicitations: 4,
            http_timeout_ms: 10_000,
            http_max_body_bytes: 4 << 20,
            max_log_lines: 100,
            max_depth: 4,
            max_model_calls: 16,
            allow_internal_origins: Vec::new(),
        }
    }
}

impl ComponentLimits {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.memory_mib >= 1, "components.memory_mib must be at least 1");
        anyhow::ensure!(self.cpu_ms >= 1, "components.cpu_ms must be at least 1");
        anyhow::ensure!(
            self.wall_ms >= self.cpu_ms,
            "components.wall_ms must be at least components.cpu_ms"
        );
        anyhow::ensure!(
            self.max_output_bytes >= 1,
            "components.max_output_bytes must be at least 1"
        );
        anyhow::ensure!(
            self.elicitation_timeout_ms >= 1,
            "components.elicitation_timeout_ms must be at least 1"
        );
        anyhow::ensure!(
            self.max_waiting_elicitations >= 1,
            "components.max_waiting_elicitations must be at least 1"
        );
        anyhow::ensure!(
            self.max_model_calls >= 1,
            "components.max_model_calls must be at least 1"
        );
        anyhow::ensure!(
            self.http_timeout_ms >= 1,
            "components.http_timeout_ms must be at least 1"
        );
        for origin in &self.allow_internal_origins {
            crate::grants::Origin::parse(origin)
                .map_err(|e| anyhow::anyhow!("components.allow_internal_origins: {e}"))?;
        }
        Ok(())
    }
}
