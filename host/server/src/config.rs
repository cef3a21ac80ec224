//! Configuration: built-in defaults < `tollgate.toml` (or `--config FILE`) <
//! `TOLLGATE_*` environment variables (`__` separates nesting levels) < command-line
//! flags. Every field has a default, so `tollgate serve` runs with no file at all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

pub use tollgate_control::ControlPlaneConfig;
pub use tollgate_hosted_actors::ActorsConfig;

pub const DEFAULT_CONFIG_FILE: &str = "tollgate.toml";

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the gateway listens on.
    pub listen: String,
    /// Where the embedded database, compiled plugins and other state live.
    pub data_dir: PathBuf,
    /// Database URL: `sqlite://…` or `postgres://…`; defaults to SQLite at
    /// `<data_dir>/tollgate.db`.
    pub database_url: Option<String>,
    /// Compiled-component cache; defaults to `<data_dir>/cache`.
    pub cache_dir: Option<PathBuf>,
    /// The key that seals install credentials in the database; created on
    /// first use. Defaults to `<data_dir>/credentials.key`. Gateways sharing a
    /// database must share it.
    pub credential_key_file: Option<PathBuf>,
    /// The ed25519 key that signs hosted actors' provenance trails; created
    /// on first use. Defaults to `<data_dir>/provenance.key`. Gateways
    /// sharing a database should share it.
    pub provenance_key_file: Option<PathBuf>,
    /// Hosted actors (`docs/actors.md`).
    pub actors: ActorsConfig,
    /// Providers: overrides of built-in catalog entries and bring-your-own endpoints.
    pub providers: BTreeMap<String, tollgate_routing::ProviderConfig>,
    /// The catalog's price table (docs/pricing.md).
    pub catalog: CatalogConfig,
    /// Extra provider adapters loaded from component files, by name.
    pub adapters: BTreeMap<String, AdapterFileConfig>,
    /// Deprecated: `[limits]`, whose keys moved to the sections of the
    /// concerns that read them; still read, with a warning (see
    /// [`DeprecatedLimits`]).
    pub limits: DeprecatedLimits,
    /// Client connections: read timeouts, caps, load shedding, shutdown, the
    /// largest request body.
    pub server: tollgate_web::server::ServerConfig,
    /// Calls to upstream providers.
    pub timeouts: tollgate_gateway::upstream::Timeouts,
    /// What is read from upstream providers.
    pub upstream: tollgate_gateway::upstream::UpstreamConfig,
    pub plugins: tollgate_plugin_host::PluginLimits,
    /// Limits of each tool-server call and skill run (`docs/components.md`).
    pub components: tollgate_components::ComponentLimits,
    /// The operator's price per call of a component's tool (`docs/components.md`).
    pub tool_prices: tollgate_tools::prices::ToolPricesConfig,
    pub ledger: tollgate_ledger::LedgerConfig,
    /// How long request-log rows stay in the database before they move to
    /// the archive (docs/ledger.md, "Retention").
    pub retention: crate::retention::RetentionConfig,
    /// Per-provider circuit breakers.
    pub breaker: tollgate_routing::health::BreakerConfig,
    /// Model groups, balancing and cache affinity (docs/routing.md).
    pub routing: tollgate_routing::groups::RoutingConfig,
    /// Usage events (CloudEvents) and their sinks.
    pub metering: tollgate_metering::MeteringConfig,
    /// Logging options; OTLP export is configured by the standard `OTEL_*` variables.
    pub telemetry: tollgate_telemetry::TelemetryConfig,
    /// The A2A control plane (`/a2a`).
    pub control_plane: ControlPlaneConfig,
    /// The package registry: blob storage and who may install adapters.
    pub registry: tollgate_packages::RegistryConfig,
    /// Console sign-in: session lifetime and OIDC providers (`[[auth.oidc]]`).
    pub auth: tollgate_identity::auth::signin::AuthConfig,
    /// Plans (`[billing.plans.<id>]`): limits and the gateway fee (docs/billing.md).
    pub billing: tollgate_billing::BillingConfig,
    /// The Batch API: lines in flight per batch, lines per file (docs/endpoints.md).
    pub batches: tollgate_batches::BatchConfig,
    /// Guardrails: the stream window, and the operator's gateway-wide ones
    /// (docs/guardrails.md).
    pub guardrails: tollgate_tools::guardrails::GuardrailsConfig,
    /// The response cache (docs/caching.md).
    pub cache: tollgate_gateway::cache::CacheConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            data_dir: PathBuf::from("./.tollgate"),
            database_url: None,
            cache_dir: None,
            credential_key_file: None,
            provenance_key_file: None,
            actors: ActorsConfig::default(),
            providers: BTreeMap::new(),
            catalog: CatalogConfig::default(),
            adapters: BTreeMap::new(),
            limits: DeprecatedLimits::default(),
            server: tollgate_web::server::ServerConfig::default(),
            timeouts: tollgate_gateway::upstream::Timeouts::default(),
            upstream: tollgate_gateway::upstream::UpstreamConfig::default(),
            plugins: tollgate_plugin_host::PluginLimits::default(),
            components: tollgate_components::ComponentLimits::default(),
            tool_prices: tollgate_tools::prices::ToolPricesConfig::default(),
            ledger: tollgate_ledger::LedgerConfig::default(),
            retention: crate::retention::RetentionConfig::default(),
            breaker: tollgate_routing::health::BreakerConfig::default(),
            routing: tollgate_routing::groups::RoutingConfig::default(),
            metering: tollgate_metering::MeteringConfig::default(),
            telemetry: tollgate_telemetry::TelemetryConfig::default(),
            control_plane: ControlPlaneConfig::default(),
            registry: tollgate_packages::RegistryConfig::default(),
            auth: tollgate_identity::auth::signin::AuthConfig::default(),
            billing: tollgate_billing::BillingConfig::default(),
            batches: tollgate_batches::BatchConfig::default(),
            guardrails: tollgate_tools::guardrails::GuardrailsConfig::default(),
            cache: tollgate_gateway::cache::CacheConfig::default(),
        }
    }
}

/// `[catalog]`: where model prices come from.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// A price table written by `tollgate catalog import-prices`, used instead
    /// of the one built in; re-read on a reload (SIGHUP).
    pub prices_file: Option<PathBuf>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterFileConfig {
    /// Path to a `tollgate:provider` component (`.wasm`).
    pub path: PathBuf,
}

/// `[limits]`, deprecated: each key moved to the section of the concern
/// that reads it. A key set here still applies where the new key is left at
/// its default, and loading says which key to use instead.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeprecatedLimits {
    /// Now `[server] max_body_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<usize>,
    /// Now `[upstream] max_body_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_upstream_body_bytes: Option<usize>,
    /// Now `[auth] key_requests_per_minute`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_requests_per_minute: Option<u32>,
}

/// Moves a deprecated key's value to its new place unless the new key is
/// set (differs from its default); returns the line that says so.
fn alias<T: PartialEq + Copy + std::fmt::Display>(
    old: (&str, Option<T>),
    new: (&str, &mut T),
    default: T,
) -> Option<String> {
    let (old_key, Some(value)) = old else {
        return None;
    };
    let (new_key, target) = new;
    if *target == default {
        *target = value;
        Some(format!(
            "`{old_key}` is deprecated: set `{new_key}` instead ({value} applied)"
        ))
    } else {
        Some(format!(
            "`{old_key}` is deprecated and ignored: `{new_key}` is set ({target} applied)"
        ))
    }
}

/// Values given on the command line; they win over every other layer.
#[derive(Debug, Default, Serialize)]
pub struct CliOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
}

/// Whether a `TOLLGATE_*` variable names configuration: its first segment must
/// be a top-level key of [`Config`]. Other `TOLLGATE_*` variables (a script's
/// `TOLLGATE_KEY`, say) are ignored rather than rejected.
fn is_config_key(key: &figment::value::UncasedStr) -> bool {
    static TOP_LEVEL_KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let keys = TOP_LEVEL_KEYS.get_or_init(|| match serde_json::to_value(Config::default()) {
        Ok(serde_json::Value::Object(fields)) => fields.keys().cloned().collect(),
        _ => Vec::new(),
    });
    let key = key.as_str().to_ascii_lowercase();
    let top = key.split("__").next().unwrap_or_default();
    keys.iter().any(|k| k == top)
}

impl Config {
    /// Loads the layered configuration. An explicit `--config` file must exist;
    /// the default `tollgate.toml` is used only if present.
    pub fn load(file: Option<&Path>, overrides: CliOverrides) -> anyhow::Result<Self> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        match file {
            Some(path) => {
                anyhow::ensure!(path.is_file(), "config file {} does not exist", path.display());
                figment = figment.merge(Toml::file_exact(path));
            }
            None if Path::new(DEFAULT_CONFIG_FILE).is_file() => {
                figment = figment.merge(Toml::file_exact(DEFAULT_CONFIG_FILE))
            }
            None => {}
        }
        let mut config: Config = figment
            .merge(Env::prefixed("TOLLGATE_").filter(is_config_key).split("__"))
            .merge(Serialized::defaults(overrides))
            .extract()
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
        for line in config.apply_deprecated() {
            tracing::warn!("configuration: {line}");
        }
        Ok(config)
    }

    /// Applies the deprecated `[limits]` keys where their new keys are left
    /// at their defaults; one line per deprecated key set, for the log.
    pub fn apply_deprecated(&mut self) -> Vec<String> {
        let limits = std::mem::take(&mut self.limits);
        let server = tollgate_web::server::ServerConfig::default();
        let upstream = tollgate_gateway::upstream::UpstreamConfig::default();
        [
            alias(
                ("limits.max_body_bytes", limits.max_body_bytes),
                ("server.max_body_bytes", &mut self.server.max_body_bytes),
                server.max_body_bytes,
            ),
            alias(
                ("limits.max_upstream_body_bytes", limits.max_upstream_body_bytes),
                ("upstream.max_body_bytes", &mut self.upstream.max_body_bytes),
                upstream.max_body_bytes,
            ),
            alias(
                ("limits.key_requests_per_minute", limits.key_requests_per_minute),
                ("auth.key_requests_per_minute", &mut self.auth.key_requests_per_minute),
                0,
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    pub fn database_url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| tollgate_core::db::sqlite_url(&self.data_dir.join("tollgate.db")))
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(|| self.data_dir.join("cache"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            r#"
listen = "127.0.0.1:9999"
data_dir = "./somewhere"
[providers.acme]
adapter = "openai-compatible"
base_url = "http://127.0.0.1:9000/v1"
api_key = "sk-anything"
[[providers.acme.models]]
id = "small"
input_price_per_mtok = "0.50"
output_price_per_mtok = "1.50"
context_length = 128000
[providers.openai]
base_url = "http://127.0.0.1:9001/v1"
"#,
        )
        .unwrap();
        let config = Config::load(
            Some(&path),
            CliOverrides {
                listen: Some("127.0.0.1:1".into()),
                data_dir: None,
            },
        )
        .unwrap();
        assert_eq!(config.listen, "127.0.0.1:1");
        assert_eq!(config.data_dir, PathBuf::from("./somewhere"));
        let acme = &config.providers["acme"];
        assert_eq!(acme.models[0].id, "small");
        assert_eq!(acme.models[0].context_length, Some(128000));
        assert_eq!(
            config.providers["openai"].base_url.as_deref(),
            Some("http://127.0.0.1:9001/v1")
        );
        assert_eq!(config.plugins.memory_mib, 64);
    }

    #[test]
    fn deprecated_limits_apply_where_their_new_keys_are_unset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        let text = "[limits]\nmax_body_bytes = 1000\nmax_upstream_body_bytes = 2000\nkey_requests_per_minute = 7\n\
                    [upstream]\nmax_body_bytes = 3000\n";
        std::fs::write(&path, text).unwrap();
        let mut config: Config = Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::file_exact(&path))
            .extract()
            .unwrap();
        let lines = config.apply_deprecated();
        assert_eq!(config.server.max_body_bytes, 1000);
        assert_eq!(config.auth.key_requests_per_minute, 7);
        // The new key wins over the deprecated one.
        assert_eq!(config.upstream.max_body_bytes, 3000);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("set `server.max_body_bytes` instead"), "{lines:?}");
        assert!(
            lines[1].contains("ignored: `upstream.max_body_bytes` is set"),
            "{lines:?}"
        );
        let mut plain = Config::default();
        assert!(plain.apply_deprecated().is_empty());
        assert_eq!(plain.server.max_body_bytes, 4 << 20);
    }

    #[test]
    #[allow(unsafe_code)]
    fn environment_overrides_nested_keys_and_ignores_foreign_variables() {
        // SAFETY: tests in this module touch only these TOLLGATE_ variables.
        unsafe {
            std::env::set_var("TOLLGATE_TIMEOUTS__CONNECT_MS", "1234");
            std::env::set_var("TOLLGATE_LEDGER__ENABLED", "false");
            std::env::set_var("TOLLGATE_SOME_SCRIPT_VARIABLE", "ignored");
        }
        let config = Config::load(None, CliOverrides::default()).unwrap();
        assert_eq!(config.timeouts.connect_ms, 1234);
        assert!(!config.ledger.enabled);
        unsafe {
            std::env::remove_var("TOLLGATE_TIMEOUTS__CONNECT_MS");
            std::env::remove_var("TOLLGATE_LEDGER__ENABLED");
            std::env::remove_var("TOLLGATE_SOME_SCRIPT_VARIABLE");
        }
    }

    #[test]
    fn rejects_unknown_keys_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "lisen = \"x\"\n").unwrap();
        assert!(Config::load(Some(&path), CliOverrides::default()).is_err());
        assert!(Config::load(Some(&dir.path().join("missing.toml")), CliOverrides::default()).is_err());
    }
}
