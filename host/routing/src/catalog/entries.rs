//! The built-in provider entries (data in `host/catalog/`, embedded at build
//! time) as written, and the checks every entry passes, built-in or
//! configured, so a typo in a capability or id fails at start and not on a
//! request.

use anyhow::Context;
use serde::Deserialize;

use crate::config::ModelConfig;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_catalog.rs"));
}

/// How the host attaches the provider credential. The adapter may ask only for
/// the slot its provider declares (see [`crate::egress`]).
#[derive(Clone, Copy, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum AuthStyle {
    None,
    Bearer,
    Header,
    Query,
    AwsSigv4,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    provider: Vec<CatalogProvider>,
}

/// What a provider or model supports, as listed in `/v1/models` and
/// filterable there. A catalog entry naming anything else is rejected at
/// start. `caching`: the model caches prompts (reads billed at the cache
/// price), which the price table says per model.
pub const CAPABILITIES: [&str; 7] = [
    "streaming",
    "tools",
    "json_mode",
    "structured_outputs",
    "vision",
    "reasoning",
    "caching",
];

/// The operations a model may serve, named after their OpenAI endpoints:
/// `chat` (chat completions, and the Messages and Responses dialects), and
/// the rest, which only an adapter of WIT 0.3.0 serves.
pub const OPERATIONS: [&str; 9] = [
    "chat",
    "embeddings",
    "image_generation",
    "image_edit",
    "speech",
    "transcription",
    "translation",
    "moderation",
    "rerank",
];

/// One `[[provider]]` entry of a built-in catalog file, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogProvider {
    pub id: String,
    pub name: String,
    pub adapter: String,
    /// May hold `{ENV_VAR}` placeholders, filled from the environment at start.
    pub base_url: String,
    pub auth: AuthStyle,
    /// The header the key goes in, for `auth = "header"`.
    pub auth_header: Option<String>,
    /// The query parameter the key goes in, for `auth = "query"`.
    pub auth_query: Option<String>,
    /// The SigV4 signing service, for `auth = "aws-sigv4"`.
    pub aws_service: Option<String>,
    /// The SigV4 region; by default the region in the `base_url` host.
    pub aws_region: Option<String>,
    /// Origins besides `base_url`'s that the adapter may send to.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub models: Vec<ModelConfig>,
}

/// Every built-in provider entry, in catalog-file order, with the file it
/// came from. Fails on a file that does not parse.
pub fn builtin_entries() -> anyhow::Result<Vec<(&'static str, CatalogProvider)>> {
    let mut entries = Vec::new();
    for (file, text) in builtin::BUILTIN_CATALOG {
        let parsed: CatalogFile =
            toml::from_str(text).with_context(|| format!("built-in catalog file {file} is malformed"))?;
        entries.extend(parsed.provider.into_iter().map(|p| (*file, p)));
    }
    Ok(entries)
}
pub(super) fn validate_capabilities(provider: &str, flags: &[String]) -> anyhow::Result<()> {
    for flag in flags {
        anyhow::ensure!(
            CAPABILITIES.contains(&flag.as_str()),
            "provider '{provider}' lists unknown capability '{flag}' (known: {})",
            CAPABILITIES.join(", ")
        );
    }
    Ok(())
}

pub fn validate_provider_id(id: &str) -> anyhow::Result<()> {
    let ok = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    anyhow::ensure!(ok, "provider id '{id}' must be lowercase letters, digits, '-' or '_'");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_capabilities_are_rejected() {
        assert!(validate_capabilities("p", &["tools".into(), "vision".into()]).is_ok());
        assert!(validate_capabilities("p", &["telepathy".into()]).is_err());
    }
}
