//! The provider catalog: built-in providers (data in `host/catalog/`) merged with
//! the configuration, resolved once at start into routes the hot path looks up by
//! model id. A route freezes the model's price for the life of a request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::egress::{CredentialSlot, EgressPolicy};
use crate::prices::PriceTable;
use tollgate_core::money::{Nanos, PicoPerToken, Price};
use tollgate_core::secret::Secret;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_catalog.rs"));
}

pub use crate::config::{ModelConfig, ProviderConfig};

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

/// What a provider supports, as listed in `/v1/models` and filterable there.
/// A catalog entry naming anything else is rejected at start.
pub const CAPABILITIES: [&str; 6] = [
    "streaming",
    "tools",
    "json_mode",
    "structured_outputs",
    "vision",
    "reasoning",
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

#[derive(Debug)]
pub struct Provider {
    pub id: String,
    pub name: String,
    pub adapter: String,
    pub base_url: String,
    pub auth: AuthStyle,
    pub api_key_env: Option<String>,
    /// The resolved secret, if any. Never sent to adapters.
    pub credential: Option<Secret>,
    /// Where the adapter may send requests and how the credential rides on them.
    pub egress: EgressPolicy,
    /// Flags from [`CAPABILITIES`]; empty for a provider added only in config.
    pub capabilities: Vec<String>,
    /// `{ENV_VAR}` placeholders of `base_url` whose variable is not set.
    pub unresolved: Vec<String>,
}

impl Provider {
    /// A provider that needs a key but has none, or whose URL still has a
    /// placeholder, cannot serve requests.
    pub fn is_available(&self) -> bool {
        self.unavailable_reason().is_none()
    }

    /// Why the provider cannot serve requests, in words a user can act on.
    pub fn unavailable_reason(&self) -> Option<String> {
        if self.auth != AuthStyle::None && self.credential.is_none() {
            return Some(match &self.api_key_env {
                Some(env) => format!("no API key: set {env} or providers.{}.api_key", self.id),
                None => format!("no API key: set providers.{}.api_key", self.id),
            });
        }
        if let Some(name) = self.unresolved.first() {
            return Some(format!(
                "base_url needs {name}: set it, or set providers.{}.base_url",
                self.id
            ));
        }
        None
    }

    pub fn has_capability(&self, flag: &str) -> bool {
        self.capabilities.iter().any(|c| c == flag)
    }
}

#[derive(Debug)]
pub struct ModelRoute {
    /// `<provider>/<model>`, as callers name it.
    pub id: String,
    pub provider: Arc<Provider>,
    pub upstream_model: String,
    /// Zero for an unpriced model (see [`ModelRoute::priced`]).
    pub price: Price,
    /// False when neither the config, the price table nor the catalog gives a
    /// price: such a model cannot be billed, so it is not served while the
    /// wallet ledger is on.
    pub priced: bool,
    /// Where the price came from.
    pub price_source: PriceSource,
    pub context_length: Option<u64>,
    /// The most output tokens the model writes in one answer, when known.
    pub max_output_tokens: Option<u64>,
}

/// Where a model's price came from, most specific first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriceSource {
    /// `[providers.<id>]` in the configuration.
    Config,
    /// The sourced price table, under the source's key for the model.
    Table(String),
    /// The catalog entry itself (local servers, which cost nothing per token).
    Catalog,
    /// No price anywhere.
    None,
}

impl PriceSource {
    pub fn name(&self) -> &'static str {
        match self {
            PriceSource::Config => "config",
            PriceSource::Table(_) => "price_table",
            PriceSource::Catalog => "catalog",
            PriceSource::None => "none",
        }
    }
}

impl ModelRoute {
    /// Why this model cannot be served from a wallet: it has no price.
    pub fn unpriced_reason(&self) -> Option<String> {
        (!self.priced).then(|| {
            format!(
                "no price: the price table has no entry for it; set input_price_per_mtok and output_price_per_mtok for model '{}' under [providers.{}] in tollgate.toml",
                self.upstream_model, self.provider.id
            )
        })
    }
}

#[derive(Debug, Default)]
pub struct Catalog {
    routes: HashMap<String, Arc<ModelRoute>>,
    /// Model ids in a stable order, for listings.
    order: Vec<String>,
}

impl Catalog {
    /// Merges the built-in catalog with the configured providers. Configured fields
    /// override built-in ones; configured models override built-in models of the
    /// same id and add new ones. Secrets come from `api_key`, else `api_key_env`.
    pub fn build(
        configured: &BTreeMap<String, ProviderConfig>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        Self::build_priced(configured, env, PriceTable::builtin())
    }

    /// [`Catalog::build`] with `prices` as the price table. A model's price
    /// is, most specific first: its `[providers.<id>]` config, the table's
    /// entry, the catalog entry's own. Kind prices set in config (cache read
    /// or write, reasoning, per request) override the table's one by one.
    pub fn build_priced(
        configured: &BTreeMap<String, ProviderConfig>,
        env: &dyn Fn(&str) -> Option<String>,
        prices: &PriceTable,
    ) -> anyhow::Result<Self> {
        let mut providers: BTreeMap<String, CatalogProvider> = BTreeMap::new();
        for (file, provider) in builtin_entries()? {
            if providers.contains_key(&provider.id) {
                bail!("built-in catalog lists provider '{}' twice ({file})", provider.id);
            }
            validate_capabilities(&provider.id, &provider.capabilities)?;
            providers.insert(provider.id.clone(), provider);
        }
        for (id, config) in configured {
            validate_provider_id(id)?;
            let entry = match providers.remove(id) {
                Some(mut known) => {
                    if let Some(v) = &config.name {
                        known.name = v.clone();
                    }
                    if let Some(v) = &config.adapter {
                        known.adapter = v.clone();
                    }
                    if let Some(v) = &config.base_url {
                        known.base_url = v.clone();
                    }
                    if config.api_key_env.is_some() {
                        known.api_key_env = config.api_key_env.clone();
                    }
                    config.overlay_auth(&mut known);
                    for model in &config.models {
                        known.models.retain(|m| m.id != model.id);
                        known.models.push(model.clone());
                    }
                    known
                }
                None => {
                    let mut entry = CatalogProvider {
                        id: id.clone(),
                        name: config.name.clone().unwrap_or_else(|| id.clone()),
                        adapter: config.adapter.clone().unwrap_or_else(|| "openai-compatible".into()),
                        base_url: config
                            .base_url
                            .clone()
                            .with_context(|| format!("provider '{id}' is not built in, so it needs a base_url"))?,
                        auth: if config.api_key.is_some() || config.api_key_env.is_some() {
                            AuthStyle::Bearer
                        } else {
                            AuthStyle::None
                        },
                        auth_header: None,
                        auth_query: None,
                        aws_service: None,
                        aws_region: None,
                        allowed_origins: Vec::new(),
                        api_key_env: config.api_key_env.clone(),
                        capabilities: Vec::new(),
                        models: config.models.clone(),
                    };
                    config.overlay_auth(&mut entry);
                    entry
                }
            };
            providers.insert(id.clone(), entry);
        }

        let mut catalog = Catalog::default();
        for (id, entry) in providers {
            let api_key = configured.get(&id).and_then(|c| c.api_key.clone());
            let credential = api_key
                .or_else(|| entry.api_key_env.as_deref().and_then(env).map(Secret::new))
                .filter(|k| !k.is_empty())
                .or_else(|| match entry.auth {
                    AuthStyle::AwsSigv4 => crate::aws::credential_from_env(env).map(Secret::new),
                    _ => None,
                });
            let (base_url, unresolved) = fill_placeholders(&entry.base_url, env);
            let slot = declared_slot(&entry, &base_url, env)?;
            let egress = EgressPolicy::new(&base_url, &entry.allowed_origins, slot)
                .with_context(|| format!("provider '{}'", entry.id))?;
            let provider = Arc::new(Provider {
                id: entry.id,
                name: entry.name,
                adapter: entry.adapter,
                base_url,
                auth: entry.auth,
                api_key_env: entry.api_key_env,
                credential,
                egress,
                capabilities: entry.capabilities,
                unresolved,
            });
            let operator_models = configured.get(&provider.id).map(|c| &c.models[..]).unwrap_or_default();
            for model in entry.models {
                let from_config = operator_models.contains(&model);
                let route = resolve_model(&provider, &model, from_config, prices)?;
                if catalog.routes.contains_key(&route.id) {
                    bail!("model '{}' is listed twice", route.id);
                }
                catalog.order.push(route.id.clone());
                catalog.routes.insert(route.id.clone(), Arc::new(route));
            }
        }
        Ok(catalog)
    }

    pub fn resolve(&self, model: &str) -> Option<&Arc<ModelRoute>> {
        self.routes.get(model)
    }

    pub fn routes(&self) -> impl Iterator<Item = &Arc<ModelRoute>> {
        self.order.iter().map(|id| &self.routes[id])
    }

    /// Adapter names the catalog's providers use, for loading at start.
    pub fn adapter_names(&self) -> impl Iterator<Item = &str> {
        self.routes.values().map(|r| r.provider.adapter.as_str())
    }
}

/// The credential slot a provider declares, with the names its `auth` style
/// needs. Adapters may ask only for this slot (see [`crate::egress`]).
fn declared_slot(
    entry: &CatalogProvider,
    base_url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<CredentialSlot> {
    let id = &entry.id;
    let named = |value: &Option<String>, key: &str| {
        value
            .clone()
            .filter(|v| !v.is_empty())
            .with_context(|| format!("provider '{id}' has auth = \"{}\" but no {key}", auth_name(entry.auth)))
    };
    Ok(match entry.auth {
        AuthStyle::None => CredentialSlot::None,
        AuthStyle::Bearer => CredentialSlot::Bearer,
        AuthStyle::Header => {
            let name = named(&entry.auth_header, "auth_header")?.to_ascii_lowercase();
            anyhow::ensure!(
                http::HeaderName::from_bytes(name.as_bytes()).is_ok() && !crate::egress::is_reserved_header_name(&name),
                "provider '{id}': auth_header '{name}' is not a header the key may go in"
            );
            CredentialSlot::Header(name)
        }
        AuthStyle::Query => CredentialSlot::Query(named(&entry.auth_query, "auth_query")?),
        AuthStyle::AwsSigv4 => CredentialSlot::AwsSigv4 {
            service: named(&entry.aws_service, "aws_service")?,
            region: match &entry.aws_region {
                Some(region) => region.clone(),
                None => crate::aws::default_region(base_url, env),
            },
        },
    })
}

fn auth_name(style: AuthStyle) -> &'static str {
    match style {
        AuthStyle::None => "none",
        AuthStyle::Bearer => "bearer",
        AuthStyle::Header => "header",
        AuthStyle::Query => "query",
        AuthStyle::AwsSigv4 => "aws-sigv4",
    }
}

/// Replaces each `{NAME}` in `template` whose variable is set; returns the
/// result and the names left unresolved (kept as written, so the URL shows what
/// is missing).
pub fn fill_placeholders(template: &str, env: &dyn Fn(&str) -> Option<String>) -> (String, Vec<String>) {
    let mut out = String::with_capacity(template.len());
    let mut unresolved = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..close];
        match env(name).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(&value),
            None => {
                out.push_str(&rest[open..=close]);
                unresolved.push(name.to_string());
            }
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    (out, unresolved)
}

fn validate_capabilities(provider: &str, flags: &[String]) -> anyhow::Result<()> {
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

fn resolve_model(
    provider: &Arc<Provider>,
    model: &ModelConfig,
    from_config: bool,
    prices: &PriceTable,
) -> anyhow::Result<ModelRoute> {
    anyhow::ensure!(
        !model.id.is_empty(),
        "provider '{}' has a model with an empty id",
        provider.id
    );
    let id = format!("{}/{}", provider.id, model.id);
    let price =
        |text: &str, what: &str| PicoPerToken::from_usd_per_mtok(text).with_context(|| format!("model '{id}': {what}"));
    let inline = match (&model.input_price_per_mtok, &model.output_price_per_mtok) {
        (Some(input), Some(output)) => Some(Price::tokens(
            price(input, "input_price_per_mtok")?,
            price(output, "output_price_per_mtok")?,
        )),
        (None, None) => None,
        _ => anyhow::bail!("model '{id}': set both input_price_per_mtok and output_price_per_mtok, or neither"),
    };
    let table = prices
        .get(&id)
        .map(|entry| entry.price().map(|p| (p, entry.key.clone())))
        .transpose()
        .with_context(|| format!("model '{id}': price table entry"))?;
    let (mut base, source) = match (inline, table) {
        (Some(price), _) if from_config => (price, PriceSource::Config),
        (_, Some((price, key))) => (price, PriceSource::Table(key)),
        (Some(price), None) => (price, PriceSource::Catalog),
        (None, None) => (Price::default(), PriceSource::None),
    };
    let kinds = [
        (
            &model.cache_read_price_per_mtok,
            &mut base.cache_read,
            "cache_read_price_per_mtok",
        ),
        (
            &model.cache_write_price_per_mtok,
            &mut base.cache_write,
            "cache_write_price_per_mtok",
        ),
        (
            &model.reasoning_price_per_mtok,
            &mut base.reasoning,
            "reasoning_price_per_mtok",
        ),
    ];
    for (configured, slot, what) in kinds {
        if let Some(text) = configured {
            *slot = Some(price(text, what)?);
        }
    }
    if let Some(text) = &model.request_price {
        base.per_request = Nanos::from_usd(text).with_context(|| format!("model '{id}': request_price"))?;
    }
    Ok(ModelRoute {
        id,
        provider: provider.clone(),
        upstream_model: model.upstream.clone().unwrap_or_else(|| model.id.clone()),
        priced: source != PriceSource::None,
        price: base,
        price_source: source,
        context_length: model.context_length,
        max_output_tokens: model.max_output_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn builtin_catalog_loads_and_needs_keys() {
        let catalog = Catalog::build(&BTreeMap::new(), &no_env).unwrap();
        let route = catalog.resolve("openai/gpt-4o-mini").unwrap();
        assert_eq!(route.upstream_model, "gpt-4o-mini");
        assert!(!route.provider.is_available());
        let with_key = Catalog::build(&BTreeMap::new(), &|name| {
            (name == "OPENAI_API_KEY").then(|| "sk".to_string())
        })
        .unwrap();
        assert!(with_key.resolve("openai/gpt-4o-mini").unwrap().provider.is_available());
    }

    #[test]
    fn config_adds_and_overrides_providers() {
        let mut configured = BTreeMap::new();
        configured.insert(
            "acme".to_string(),
            ProviderConfig {
                base_url: Some("http://127.0.0.1:9/v1".into()),
                api_key: Some(Secret::new("sk-x")),
                models: vec![ModelConfig {
                    id: "small".into(),
                    upstream: None,
                    input_price_per_mtok: Some("0.50".into()),
                    output_price_per_mtok: Some("1.50".into()),
                    cache_read_price_per_mtok: Some("0.05".into()),
                    cache_write_price_per_mtok: None,
                    reasoning_price_per_mtok: None,
                    request_price: Some("0.001".into()),
                    context_length: Some(1000),
                    max_output_tokens: Some(500),
                }],
                ..Default::default()
            },
        );
        configured.insert(
            "openai".to_string(),
            ProviderConfig {
                base_url: Some("http://127.0.0.1:8/v1".into()),
                ..Default::default()
            },
        );
        let catalog = Catalog::build(&configured, &no_env).unwrap();
        let acme = catalog.resolve("acme/small").unwrap();
        assert_eq!(acme.price.input, PicoPerToken(500_000));
        assert_eq!(acme.price.cache_read, Some(PicoPerToken(50_000)));
        assert_eq!(acme.price.per_request, Nanos(1_000_000));
        assert_eq!(acme.price_source, PriceSource::Config);
        assert_eq!(acme.max_output_tokens, Some(500));
        assert_eq!(acme.provider.credential.as_ref().map(Secret::expose), Some("sk-x"));
        assert!(
            !format!("{:?}", acme.provider).contains("sk-x"),
            "credentials never print"
        );
        assert_eq!(acme.provider.auth, AuthStyle::Bearer);
        assert_eq!(
            catalog.resolve("openai/gpt-4o").unwrap().provider.base_url,
            "http://127.0.0.1:8/v1"
        );
    }

    #[test]
    fn placeholders_fill_from_env_or_make_the_provider_unavailable() {
        let env = |name: &str| (name == "A").then(|| "x".to_string());
        assert_eq!(
            fill_placeholders("https://{A}.io/{B}/v1", &env),
            ("https://x.io/{B}/v1".to_string(), vec!["B".to_string()])
        );
        assert_eq!(
            fill_placeholders("http://h/v1", &env),
            ("http://h/v1".to_string(), vec![])
        );
        let mut configured = BTreeMap::new();
        configured.insert(
            "tmpl".to_string(),
            ProviderConfig {
                base_url: Some("https://{TG_TEST_UNSET_ACCOUNT}.example/v1".into()),
                api_key: Some(Secret::new("k")),
                models: vec![ModelConfig {
                    id: "m".into(),
                    upstream: None,
                    input_price_per_mtok: Some("0".into()),
                    output_price_per_mtok: Some("0".into()),
                    cache_read_price_per_mtok: None,
                    cache_write_price_per_mtok: None,
                    reasoning_price_per_mtok: None,
                    request_price: None,
                    context_length: None,
                    max_output_tokens: None,
                }],
                ..Default::default()
            },
        );
        let catalog = Catalog::build(&configured, &no_env).unwrap();
        let provider = &catalog.resolve("tmpl/m").unwrap().provider;
        assert!(!provider.is_available());
        assert!(provider.unavailable_reason().unwrap().contains("TG_TEST_UNSET_ACCOUNT"));
        let openai = &catalog.resolve("openai/gpt-4o").unwrap().provider;
        assert!(openai.unavailable_reason().unwrap().contains("OPENAI_API_KEY"));
        assert!(openai.has_capability("tools") && !openai.has_capability("teleport"));
    }

    #[test]
    fn unknown_capabilities_are_rejected() {
        assert!(validate_capabilities("p", &["tools".into(), "vision".into()]).is_ok());
        assert!(validate_capabilities("p", &["telepathy".into()]).is_err());
    }

    #[test]
    fn rejects_bad_entries() {
        let mut configured = BTreeMap::new();
        configured.insert("nourl".to_string(), ProviderConfig::default());
        assert!(Catalog::build(&configured, &no_env).is_err());
        let mut configured = BTreeMap::new();
        configured.insert(
            "Bad Id".to_string(),
            ProviderConfig {
                base_url: Some("http://x".into()),
                ..Default::default()
            },
        );
        assert!(Catalog::build(&configured, &no_env).is_err());
    }
}
