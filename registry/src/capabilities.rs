//! What a package asks for when it runs, read from its manifest, so an
//! installer sees it before anything runs (installs and `packages.get` show
//! it). The host grants no more: a tool server reaches only the origins its
//! install approves among these hosts (and, on tool WIT 0.4.0, calls models
//! only when it declares `models`), and a skill calls models and tools only
//! through the caller's metered pipeline (docs/components.md).

use schemars::JsonSchema;
use serde::Serialize;

use crate::manifest::{CAPABILITY_HTTP, CAPABILITY_MODELS};
use crate::{Manifest, PackageKind};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Capabilities {
    /// Hosts it may ask to reach over HTTP (`metadata.allowed_hosts`; `*`: any
    /// the installer approves). Each install approves origins among them.
    pub egress: Vec<String>,
    /// It calls models, billed to the calling key's wallet.
    pub models: bool,
    /// It calls the workspace's installed tools.
    pub tools: bool,
    /// An install may give it credentials, which the host places on its
    /// requests to approved origins (it never reads them).
    pub credentials: bool,
}

impl Capabilities {
    /// Provider adapters and documents ask for nothing: an adapter's upstream
    /// and credential are the operator's provider configuration.
    pub fn of(manifest: &Manifest) -> Self {
        let declares = |capability: &str| manifest.metadata.capabilities.iter().any(|c| c == capability);
        match manifest.kind {
            PackageKind::ToolServer => Self {
                egress: manifest.metadata.allowed_hosts.clone(),
                models: declares(CAPABILITY_MODELS),
                credentials: declares(CAPABILITY_HTTP),
                ..Self::default()
            },
            PackageKind::Skill => Self {
                models: declares("models"),
                tools: declares("tools"),
                ..Self::default()
            },
            PackageKind::Guardrail => Self {
                egress: manifest.metadata.allowed_hosts.clone(),
                models: declares("models"),
                credentials: declares(CAPABILITY_HTTP),
                ..Self::default()
            },
            _ => Self::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_server_asks_for_its_hosts_and_a_skill_for_models() {
        let mut manifest: Manifest = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "kind": "tool-server", "name": "acme/weather", "version": "1.0.0",
            "license": "MIT",
            "content": {"digest": crate::Digest::of(b"x").to_string(), "size": 1, "media_type": "application/wasm"},
            "metadata": {"world": "tollgate:tool/tool-server@0.1.0", "capabilities": ["http"], "allowed_hosts": ["api.weather.example"]}
        }))
        .unwrap();
        let tool = Capabilities::of(&manifest);
        assert_eq!(tool.egress, ["api.weather.example"]);
        assert!(tool.credentials && !tool.models);

        manifest.metadata.world = Some("tollgate:tool/tool-server@0.4.0".into());
        manifest.metadata.capabilities = vec!["http".into(), "models".into()];
        let sampling = Capabilities::of(&manifest);
        assert!(sampling.models && sampling.credentials && !sampling.tools);

        manifest.kind = PackageKind::Skill;
        manifest.metadata.capabilities = vec!["models".into()];
        manifest.metadata.allowed_hosts.clear();
        let skill = Capabilities::of(&manifest);
        assert!(skill.models && !skill.tools && !skill.credentials && skill.egress.is_empty());

        manifest.kind = PackageKind::ProviderAdapter;
        assert_eq!(Capabilities::of(&manifest), Capabilities::default());
    }
}
