//! A model's route: the provider that serves it, its upstream name and the
//! price frozen for the life of a request. The price is chosen most specific
//! first (operator config, the price table, the catalog entry), so an
//! operator can always override what ships.

use std::sync::Arc;

use anyhow::Context;
use tollgate_core::money::{Nanos, PicoPerToken, Price, UsdPerMtok};
use tollgate_core::units::UnitPrices;

use super::{ModelConfig, Provider};
use crate::prices::{PriceTable, Source};

#[derive(Debug)]
pub struct ModelRoute {
    /// `<provider>/<model>`, as callers name it.
    pub id: String,
    pub provider: Arc<Provider>,
    pub upstream_model: String,
    /// Zero for an unpriced model (see [`ModelRoute::priced`]).
    pub price: Price,
    /// The token prices as `sort: price` names them in its reason, written
    /// once here: formatting them on every routed request cost more than
    /// the choosing.
    pub price_label: String,
    /// False when neither the config, the price table nor the catalog gives a
    /// price: such a model cannot be billed, so it is not served while the
    /// wallet ledger is on.
    pub priced: bool,
    /// Where the price came from.
    pub price_source: PriceSource,
    pub context_length: Option<u64>,
    /// The most output tokens the model writes in one answer, when known.
    pub max_output_tokens: Option<u64>,
    /// Flags from [`super::CAPABILITIES`]: the model's own where the price
    /// table knows them, else its provider's.
    pub capabilities: Vec<String>,
    /// What the model serves, from [`super::OPERATIONS`]: `["chat"]` unless
    /// the config or the price table says otherwise.
    pub operations: Vec<String>,
    /// Prices in the operations' own units (images, characters, seconds of
    /// audio, searches); empty for a model priced by tokens only.
    pub units: UnitPrices,
}

/// Where a model's price came from, most specific first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriceSource {
    /// `[providers.<id>]` in the configuration.
    Config,
    /// The sourced price table, under the source's key for the model.
    Table { key: String, source: Arc<Source> },
    /// The catalog entry itself (local servers, which cost nothing per token).
    Catalog,
    /// No price anywhere.
    None,
}

impl PriceSource {
    pub fn name(&self) -> &'static str {
        match self {
            PriceSource::Config => "config",
            PriceSource::Table { .. } => "price_table",
            PriceSource::Catalog => "catalog",
            PriceSource::None => "none",
        }
    }
}

impl ModelRoute {
    pub fn has_capability(&self, flag: &str) -> bool {
        self.capabilities.iter().any(|c| c == flag)
    }

    /// Whether the model serves `operation` (one of [`super::OPERATIONS`]).
    pub fn serves(&self, operation: &str) -> bool {
        self.operations.iter().any(|o| o == operation)
    }

    /// The refusal of a request for `operation` to a model that does not
    /// serve it, in a sentence.
    pub fn not_serving(&self, operation: &str) -> String {
        format!(
            "model '{}' does not serve {operation} (it serves: {})",
            self.id,
            self.operations.join(", ")
        )
    }

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
/// `source` is `prices.source`, shared by every route priced from the table.
pub(super) fn resolve_model(
    provider: &Arc<Provider>,
    model: &ModelConfig,
    from_config: bool,
    prices: &PriceTable,
    source: &Arc<Source>,
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
    let entry = prices.get(&id);
    let configured_units = crate::prices::unit_prices(
        model.image_prices.as_ref(),
        model.speech_price_per_mchars.as_deref(),
        model.audio_price_per_second.as_deref(),
        model.search_price.as_deref(),
    )
    .with_context(|| format!("model '{id}'"))?;
    // A model priced in units only (an image model) bills no tokens.
    let inline = inline.or_else(|| (!configured_units.is_empty()).then(Price::default));
    let table = entry
        .map(|entry| entry.price().map(|p| (p, entry.key.clone())))
        .transpose()
        .with_context(|| format!("model '{id}': price table entry"))?;
    let units = match (&configured_units, entry) {
        (units, _) if !units.is_empty() && from_config => units.clone(),
        (_, Some(entry)) => entry
            .units()
            .with_context(|| format!("model '{id}': price table entry"))?,
        (units, None) => units.clone(),
    };
    let (mut base, price_source) = match (inline, table) {
        (Some(price), _) if from_config => (price, PriceSource::Config),
        (_, Some((price, key))) => (
            price,
            PriceSource::Table {
                key,
                source: source.clone(),
            },
        ),
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
    // A model its provider serves through another API (OpenAI's
    // Responses-only models) names its own adapter; the URL, key and egress
    // stay the provider's.
    let capabilities = entry
        .and_then(|e| e.capabilities.clone())
        .unwrap_or_else(|| provider.capabilities.clone());
    let operations = model
        .operations
        .clone()
        .or_else(|| entry.and_then(|e| e.operations.clone()))
        .unwrap_or_else(|| vec!["chat".to_string()]);
    if let Some(unknown) = operations.iter().find(|o| !super::OPERATIONS.contains(&o.as_str())) {
        anyhow::bail!(
            "model '{id}' lists unknown operation '{unknown}' (known: {})",
            super::OPERATIONS.join(", ")
        );
    }
    let provider = match model.adapter.as_deref().or(entry.and_then(|e| e.adapter.as_deref())) {
        Some(adapter) if adapter != provider.adapter => Arc::new(Provider {
            adapter: adapter.to_string(),
            ..Provider::clone(provider)
        }),
        _ => provider.clone(),
    };
    Ok(ModelRoute {
        id,
        provider,
        upstream_model: model.upstream.clone().unwrap_or_else(|| model.id.clone()),
        priced: price_source != PriceSource::None,
        price_label: format!(
            "input {} + output {} USD/Mtok",
            UsdPerMtok(base.input),
            UsdPerMtok(base.output)
        ),
        price: base,
        price_source,
        context_length: model.context_length.or(entry.and_then(|e| e.context_length)),
        max_output_tokens: model.max_output_tokens.or(entry.and_then(|e| e.max_output_tokens)),
        capabilities,
        operations,
        units,
    })
}
