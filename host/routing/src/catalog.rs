//! The provider catalog: built-in providers (data in `host/catalog/`) merged with
//! the configuration, resolved once at start into routes the hot path looks up by
//! model id. A route freezes the model's price for the life of a request.
//!
//! A provider entry as written, and its checks, is in `entries`; where and
//! how a provider is called (URL placeholders, credential slot) in
//! `endpoint`; a model's route and the price it freezes in `models`. This
//! module merges config over the built-in entries and builds the table.

mod endpoint;
mod entries;
mod models;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::{Context, bail};

use crate::egress::EgressPolicy;
use crate::prices::PriceTable;
use tollgate_core::secret::Secret;

pub use crate::config::{ModelConfig, ProviderConfig};
use endpoint::declared_slot;
pub use endpoint::fill_placeholders;
use entries::validate_capabilities;
pub use entries::{AuthStyle, CAPABILITIES, CatalogProvider, OPERATIONS, builtin_entries, validate_provider_id};
use models::resolve_model;
pub use models::{ModelRoute, PriceSource};

#[derive(Clone, Debug)]
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
    /// A built-in keyless provider (a local server: ollama, vLLM, …) that
    /// the operator has not named in `[providers]`. Nothing says it runs, so
    /// it is off: listing it as available would send a newcomer's first
    /// request to a connection refused.
    pub needs_enabling: bool,
}

impl Provider {
    /// A provider that needs a key but has none, whose URL still has a
    /// placeholder, or that is a local server nobody enabled, cannot serve
    /// requests.
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
        if self.needs_enabling {
            return Some(format!(
                "a local server, off until enabled: add [providers.{}] to tollgate.toml (with base_url if it does not listen on {})",
                self.id, self.base_url
            ));
        }
        None
    }

    pub fn has_capability(&self, flag: &str) -> bool {
        self.capabilities.iter().any(|c| c == flag)
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
    /// Each provider also serves the table's models of it that neither the
    /// catalog nor the config names, so the catalog need not repeat the table.
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
        let table_models = prices.by_provider();
        let table_source = Arc::new(prices.source.clone());
        for (id, entry) in providers {
            let needs_enabling = entry.auth == AuthStyle::None && !configured.contains_key(&id);
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
                needs_enabling,
            });
            let operator_models = configured.get(&provider.id).map(|c| &c.models[..]).unwrap_or_default();
            let mut named: Vec<&str> = Vec::new();
            for model in &entry.models {
                let from_config = operator_models.contains(model);
                let route = resolve_model(&provider, model, from_config, prices, &table_source)?;
                if catalog.routes.contains_key(&route.id) {
                    bail!("model '{}' is listed twice", route.id);
                }
                named.push(&model.id);
                catalog.order.push(route.id.clone());
                catalog.routes.insert(route.id.clone(), Arc::new(route));
            }
            for (name, _) in table_models.get(provider.id.as_str()).into_iter().flatten() {
                if named.contains(name) {
                    continue;
                }
                let model = ModelConfig::named(name);
                let route = resolve_model(&provider, &model, false, prices, &table_source)?;
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
#[cfg(test)]
mod tests {
    use tollgate_core::money::{Nanos, PicoPerToken};

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
                    adapter: None,
                    operations: None,
                    image_prices: None,
                    speech_price_per_mchars: None,
                    audio_price_per_second: None,
                    search_price: None,
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
                    input_price_per_mtok: Some("0".into()),
                    output_price_per_mtok: Some("0".into()),
                    ..ModelConfig::named("m")
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
    fn the_price_tables_models_become_routes_unless_named() {
        let model = |key: &str, input: &str, capabilities: Option<&[&str]>| crate::prices::TableModel {
            key: key.into(),
            input: input.into(),
            output: "2".into(),
            cache_read: None,
            cache_write: None,
            reasoning: None,
            context_length: Some(4096),
            max_output_tokens: Some(1024),
            capabilities: capabilities.map(|c| c.iter().map(|f| f.to_string()).collect()),
            adapter: None,
            operations: None,
            images: None,
            per_mchars: None,
            per_second: None,
            per_search: None,
        };
        let mut table = PriceTable::default();
        table.source.release = "r1".into();
        table.models.insert(
            "openai/gpt-new".into(),
            model("gpt-new", "1", Some(&["streaming", "caching"])),
        );
        table
            .models
            .insert("openai/gpt-4o".into(), model("gpt-4o", "3", Some(&["streaming"])));
        table
            .models
            .insert("openai/byo-priced".into(), model("byo-priced", "5", None));
        table.models.insert("nowhere/x".into(), model("x", "1", None));
        let mut pro = model("gpt-new-pro", "10", None);
        pro.adapter = Some("openai-responses".into());
        table.models.insert("openai/gpt-new-pro".into(), pro);
        let mut configured = BTreeMap::new();
        let mut byo = ModelConfig::named("byo-priced");
        byo.input_price_per_mtok = Some("7".into());
        byo.output_price_per_mtok = Some("8".into());
        configured.insert(
            "openai".to_string(),
            ProviderConfig {
                models: vec![byo],
                ..Default::default()
            },
        );
        let catalog = Catalog::build_priced(&configured, &no_env, &table).unwrap();

        let added = catalog.resolve("openai/gpt-new").unwrap();
        assert_eq!(added.upstream_model, "gpt-new");
        assert_eq!(added.price.input, PicoPerToken(1_000_000));
        assert!(
            matches!(&added.price_source, PriceSource::Table { key, source } if key == "gpt-new" && source.release == "r1")
        );
        assert_eq!(
            (added.context_length, added.max_output_tokens),
            (Some(4096), Some(1024))
        );
        assert!(added.has_capability("caching") && !added.has_capability("tools"));
        assert!(
            added.provider.has_capability("tools"),
            "the provider's flags stay its own"
        );

        // The catalog's own model keeps its context, takes the table's price and flags.
        let catalogued = catalog.resolve("openai/gpt-4o").unwrap();
        assert_eq!(catalogued.context_length, Some(128000));
        assert_eq!(catalogued.price.input, PicoPerToken(3_000_000));
        assert_eq!(catalogued.capabilities, ["streaming"]);
        // Configured: one route, the config's price, the provider's flags when the table has none.
        let configured = catalog.resolve("openai/byo-priced").unwrap();
        assert_eq!(configured.price_source, PriceSource::Config);
        assert_eq!(configured.capabilities, configured.provider.capabilities);
        assert_eq!(catalog.routes().filter(|r| r.id == "openai/byo-priced").count(), 1);
        // A provider the catalog does not build gets no routes from the table.
        assert!(catalog.resolve("nowhere/x").is_none());
        // A Responses-only model: OpenAI's URL and key, its own adapter.
        let pro = catalog.resolve("openai/gpt-new-pro").unwrap();
        assert_eq!(pro.provider.adapter, "openai-responses");
        assert_eq!(pro.provider.id, "openai");
        assert_eq!(pro.provider.base_url, added.provider.base_url);
        assert_eq!(added.provider.adapter, "openai-compatible");
        assert!(catalog.adapter_names().any(|name| name == "openai-responses"));
    }

    #[test]
    fn the_builtin_catalog_builds_quickly() {
        let start = std::time::Instant::now();
        let models = PriceTable::builtin().models.len();
        let parsed = start.elapsed();
        let start = std::time::Instant::now();
        let catalog = Catalog::build(&BTreeMap::new(), &no_env).unwrap();
        let elapsed = start.elapsed();
        let routes = catalog.routes().count();
        println!("price table: {models} models parsed in {parsed:?}; Catalog::build: {routes} routes in {elapsed:?}");
        assert!(routes > 1000, "the price table's models are routes");
        // Generous for a debug build on a busy machine; a release build is far under.
        assert!(elapsed < std::time::Duration::from_secs(2), "{elapsed:?}");
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
