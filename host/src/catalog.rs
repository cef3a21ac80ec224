//! The provider catalog: built-in providers (data in `host/catalog/`) merged with
//! the configuration, resolved once at start into routes the hot path looks up by
//! model id. A route freezes the model's price for the life of a request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::config::{ModelConfig, ProviderConfig};
use crate::money::{PicoPerToken, Price};

const BUILTIN_CATALOG: &str = include_str!("../catalog/providers.toml");

/// How the host attaches the provider credential; the adapter names the slot.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogProvider {
    id: String,
    name: String,
    adapter: String,
    base_url: String,
    auth: AuthStyle,
    api_key_env: Option<String>,
    #[serde(default)]
    capabilities: Vec<String>,
    #[serde(default)]
    models: Vec<ModelConfig>,
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
    pub credential: Option<String>,
}

impl Provider {
    /// A provider that needs a key but has none cannot serve requests.
    pub fn is_available(&self) -> bool {
        self.auth == AuthStyle::None || self.credential.is_some()
    }
}

#[derive(Debug)]
pub struct ModelRoute {
    /// `<provider>/<model>`, as callers name it.
    pub id: String,
    pub provider: Arc<Provider>,
    pub upstream_model: String,
    pub price: Price,
    pub context_length: Option<u64>,
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
        let builtin: CatalogFile = toml::from_str(BUILTIN_CATALOG).context("built-in catalog is malformed")?;
        let mut providers: BTreeMap<String, CatalogProvider> = BTreeMap::new();
        for provider in builtin.provider {
            if providers.contains_key(&provider.id) {
                bail!("built-in catalog lists provider '{}' twice", provider.id);
            }
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
                    for model in &config.models {
                        known.models.retain(|m| m.id != model.id);
                        known.models.push(model.clone());
                    }
                    known
                }
                None => CatalogProvider {
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
                    api_key_env: config.api_key_env.clone(),
                    capabilities: Vec::new(),
                    models: config.models.clone(),
                },
            };
            providers.insert(id.clone(), entry);
        }

        let mut catalog = Catalog::default();
        for (id, entry) in providers {
            let api_key = configured.get(&id).and_then(|c| c.api_key.clone());
            let credential = api_key
                .or_else(|| entry.api_key_env.as_deref().and_then(env))
                .filter(|k| !k.is_empty());
            let provider = Arc::new(Provider {
                id: entry.id,
                name: entry.name,
                adapter: entry.adapter,
                base_url: entry.base_url,
                auth: entry.auth,
                api_key_env: entry.api_key_env,
                credential,
            });
            let _ = entry.capabilities;
            for model in entry.models {
                let route = resolve_model(&provider, &model)?;
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

fn validate_provider_id(id: &str) -> anyhow::Result<()> {
    let ok = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    anyhow::ensure!(ok, "provider id '{id}' must be lowercase letters, digits, '-' or '_'");
    Ok(())
}

fn resolve_model(provider: &Arc<Provider>, model: &ModelConfig) -> anyhow::Result<ModelRoute> {
    anyhow::ensure!(
        !model.id.is_empty(),
        "provider '{}' has a model with an empty id",
        provider.id
    );
    let price = |text: &str, what: &str| {
        PicoPerToken::from_usd_per_mtok(text).with_context(|| format!("model '{}/{}': {what}", provider.id, model.id))
    };
    Ok(ModelRoute {
        id: format!("{}/{}", provider.id, model.id),
        provider: provider.clone(),
        upstream_model: model.upstream.clone().unwrap_or_else(|| model.id.clone()),
        price: Price {
            input: price(&model.input_price_per_mtok, "input_price_per_mtok")?,
            output: price(&model.output_price_per_mtok, "output_price_per_mtok")?,
        },
        context_length: model.context_length,
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
                api_key: Some("sk-x".into()),
                models: vec![ModelConfig {
                    id: "small".into(),
                    upstream: None,
                    input_price_per_mtok: "0.50".into(),
                    output_price_per_mtok: "1.50".into(),
                    context_length: Some(1000),
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
        assert_eq!(acme.provider.credential.as_deref(), Some("sk-x"));
        assert_eq!(acme.provider.auth, AuthStyle::Bearer);
        assert_eq!(
            catalog.resolve("openai/gpt-4o").unwrap().provider.base_url,
            "http://127.0.0.1:8/v1"
        );
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
