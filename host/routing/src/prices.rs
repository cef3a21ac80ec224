//! The sourced model table (`catalog/prices/prices.toml`, docs/pricing.md):
//! each model's price per token kind, context, output limit and capabilities,
//! taken from a public, licensed list (LiteLLM's
//! `model_prices_and_context_window.json`, MIT), with the source, its licence
//! and the date it was read. The table is embedded in the binary;
//! `catalog.prices_file` replaces it, and `tollgate catalog import-prices`
//! writes a new one from that JSON format (`import`), reporting what changed.
//! The catalog serves the table's models besides its own. Pricing snapshots
//! are never touched: a new table only ever yields new snapshots.
//!
//! Money stays exact: the JSON's numbers are read as written (decimal text,
//! never a float) and held as USD per million tokens; a price finer than a
//! pico-USD per token is rounded up.

mod import;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use tollgate_core::money::{Nanos, PicoPerToken, Price};
use tollgate_core::units::{ImagePrice, UnitPrices};

/// Unit prices from their decimal texts: USD per image (by key), per
/// million characters, per second of audio, per search.
pub fn unit_prices(
    images: Option<&BTreeMap<String, String>>,
    per_mchars: Option<&str>,
    per_second: Option<&str>,
    per_search: Option<&str>,
) -> anyhow::Result<UnitPrices> {
    let images = images
        .into_iter()
        .flatten()
        .map(|(key, usd)| ImagePrice::parse(key, usd).with_context(|| format!("image price '{key}'")))
        .collect::<anyhow::Result<_>>()?;
    let nanos = |text: Option<&str>, what: &str| {
        text.map(|t| Nanos::from_usd(t).with_context(|| format!("{what} '{t}'")))
            .transpose()
    };
    Ok(UnitPrices {
        images,
        per_character: per_mchars
            .map(|t| PicoPerToken::from_usd_per_mtok(t).with_context(|| format!("price per million characters '{t}'")))
            .transpose()?,
        per_audio_second: nanos(per_second, "price per second")?,
        per_search: nanos(per_search, "price per search")?,
    })
}

pub use import::{ImportReport, Wanted, import_litellm};

const BUILTIN: &str = include_str!("../catalog/prices/prices.toml");

static BUILTIN_TABLE: LazyLock<PriceTable> =
    LazyLock::new(|| PriceTable::parse(BUILTIN).expect("the built-in price table parses"));

/// Where the prices come from, kept with the table for attribution.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub name: String,
    pub url: String,
    /// The release the file was read from, e.g. `litellm 1.109.1 (PyPI)`.
    pub release: String,
    pub licence: String,
    pub copyright: String,
    /// The date the table was imported (YYYY-MM-DD).
    pub retrieved: String,
}

/// One model: its prices, USD per million tokens as exact decimal strings,
/// and what the source says of it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TableModel {
    /// The source's key for this model.
    pub key: String,
    pub input: String,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Flags from the catalog's `CAPABILITIES`; absent when the source does
    /// not say, so the provider's flags apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    /// The adapter that serves the model when not its provider's:
    /// `openai-responses` for a model OpenAI serves only through its
    /// Responses API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    /// The operations the model serves (`["embeddings"]`); absent for a
    /// chat model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<String>>,
    /// USD per image, by `quality/size`, size, quality or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<BTreeMap<String, String>>,
    /// USD per million characters of speech.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_mchars: Option<String>,
    /// USD per second of audio transcribed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<String>,
    /// USD per search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_search: Option<String>,
}

impl TableModel {
    pub fn price(&self) -> anyhow::Result<Price> {
        let read = |text: &str| PicoPerToken::from_usd_per_mtok(text).with_context(|| format!("price '{text}'"));
        let optional = |text: &Option<String>| text.as_deref().map(read).transpose();
        Ok(Price {
            input: read(&self.input)?,
            output: read(&self.output)?,
            cache_read: optional(&self.cache_read)?,
            cache_write: optional(&self.cache_write)?,
            reasoning: optional(&self.reasoning)?,
            ..Price::default()
        })
    }

    /// The unit prices of an operation model (empty for a chat model).
    pub fn units(&self) -> anyhow::Result<UnitPrices> {
        unit_prices(
            self.images.as_ref(),
            self.per_mchars.as_deref(),
            self.per_second.as_deref(),
            self.per_search.as_deref(),
        )
    }

    /// Whether both entries bill the same, whatever else they say.
    pub fn same_price(&self, other: &TableModel) -> bool {
        (
            &self.input,
            &self.output,
            &self.cache_read,
            &self.cache_write,
            &self.reasoning,
            (&self.images, &self.per_mchars, &self.per_second, &self.per_search),
        ) == (
            &other.input,
            &other.output,
            &other.cache_read,
            &other.cache_write,
            &other.reasoning,
            (&other.images, &other.per_mchars, &other.per_second, &other.per_search),
        )
    }

    /// `in 0.15 / out 0.6 / cache read 0.075`, USD per million tokens.
    pub fn describe(&self) -> String {
        let mut text = format!("in {} / out {}", self.input, self.output);
        for (name, value) in [
            ("cache read", &self.cache_read),
            ("cache write", &self.cache_write),
            ("reasoning", &self.reasoning),
        ] {
            if let Some(value) = value {
                text.push_str(&format!(" / {name} {value}"));
            }
        }
        text
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    pub source: Source,
    /// By route id (`provider/model`). Tables written before the import added
    /// models called this `prices`; they still load.
    #[serde(default, alias = "prices")]
    pub models: BTreeMap<String, TableModel>,
}

impl PriceTable {
    /// The table built into the binary.
    pub fn builtin() -> &'static PriceTable {
        &BUILTIN_TABLE
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let table: PriceTable = toml::from_str(text).context("the price table is malformed")?;
        for (id, model) in &table.models {
            model.price().with_context(|| format!("price table entry '{id}'"))?;
            anyhow::ensure!(
                id.split_once('/').is_some_and(|(p, m)| !p.is_empty() && !m.is_empty()),
                "price table entry '{id}' is not <provider>/<model>"
            );
            for flag in model.capabilities.iter().flatten() {
                anyhow::ensure!(
                    crate::catalog::CAPABILITIES.contains(&flag.as_str()),
                    "price table entry '{id}' lists unknown capability '{flag}'"
                );
            }
        }
        Ok(table)
    }

    pub fn load(path: &std::path::Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read the price table {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("price table {}", path.display()))
    }

    pub fn get(&self, route_id: &str) -> Option<&TableModel> {
        self.models.get(route_id)
    }

    /// The table's models by provider id, as (model id, entry).
    pub fn by_provider(&self) -> BTreeMap<&str, Vec<(&str, &TableModel)>> {
        let mut out: BTreeMap<&str, Vec<(&str, &TableModel)>> = BTreeMap::new();
        for (id, model) in &self.models {
            if let Some((provider, name)) = id.split_once('/') {
                out.entry(provider).or_default().push((name, model));
            }
        }
        out
    }

    /// The table as TOML, with a header naming the source and its licence.
    pub fn to_toml(&self) -> String {
        let source = &self.source;
        let header = format!(
            "# Tollgate's model table: USD per million tokens, per token kind, context, output\n\
             # limit and capabilities of the catalog's models and of every chat model the source\n\
             # lists for a provider Tollgate serves. Generated by `tollgate catalog import-prices`\n\
             # (docs/pricing.md); do not edit by hand: set a price under [providers.<id>] in\n\
             # tollgate.toml instead.\n\
             #\n\
             # Source: {} ({}), {}, retrieved {}.\n\
             # Licence: {}, {}. The prices are facts taken from that file; the\n\
             # attribution is kept here and the licence notice in LICENSE-litellm beside this file.\n\n",
            source.name, source.url, source.release, source.retrieved, source.licence, source.copyright
        );
        header + &toml::to_string(self).expect("the price table serialises")
    }
}

/// A JSON number of USD per token, as written (`1.5e-07`, `0.000003`), →
/// USD per million tokens as an exact decimal (`0.15`, `3`), rounded up to
/// whole pico-USD per token.
pub fn per_mtok(number: &str) -> anyhow::Result<String> {
    let pico = scaled_up(number, 1, 12)?;
    let pico = u64::try_from(pico).map_err(|_| anyhow::anyhow!("'{number}' is too large"))?;
    let text = PicoPerToken(pico).usd_per_mtok();
    Ok(text.trim_end_matches('0').trim_end_matches('.').to_string())
}

/// `number` USD × `times` as exact USD, rounded up to the nano-USD (what a
/// unit price is held in): `usd_times("3.81469e-08", 1024 * 1024)` is the
/// price of a 1024×1024 image priced per pixel.
pub fn usd_times(number: &str, times: u64) -> anyhow::Result<String> {
    let nanos = scaled_up(number, u128::from(times), 9)?;
    let nanos = i64::try_from(nanos).map_err(|_| anyhow::anyhow!("'{number}' × {times} is too large"))?;
    Ok(Nanos(nanos).usd_decimal())
}

/// `number` (a JSON number as written, exponent allowed) × `times` ×
/// 10^`scale`, rounded up to a whole number: exact, never a float.
fn scaled_up(number: &str, times: u128, scale: i32) -> anyhow::Result<u128> {
    let bad = || anyhow::anyhow!("'{number}' is not a non-negative decimal number");
    let text = number.trim();
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.trim_start_matches('+').parse::<i32>().map_err(|_| bad())?),
        None => (text, 0),
    };
    let (whole, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && frac.is_empty() || !(whole.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let digits = format!("{whole}{frac}");
    let digits = digits.trim_start_matches('0');
    // value = digits × 10^(exponent − frac.len()); × times × 10^scale.
    let shift = exponent - frac.len() as i32 + scale;
    let significant: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad())?
    };
    let significant = significant.checked_mul(times).ok_or_else(bad)?;
    let scaled = if shift >= 0 {
        10u128
            .checked_pow(shift as u32)
            .and_then(|scale| significant.checked_mul(scale))
    } else {
        10u128
            .checked_pow((-shift) as u32)
            .map(|scale| significant.div_ceil(scale))
            .or(Some(u128::from(significant > 0)))
    };
    scaled.ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_prices_are_exact_products_rounded_up_once() {
        assert_eq!(usd_times("3.81469e-08", 1024 * 1024).unwrap(), "0.039999924");
        assert_eq!(usd_times("0.04", 1).unwrap(), "0.04");
        assert_eq!(usd_times("0.000283333333333", 1).unwrap(), "0.000283334");
        assert_eq!(usd_times("0", 1).unwrap(), "0");
    }

    #[test]
    fn numbers_convert_exactly() {
        assert_eq!(per_mtok("1.5e-07").unwrap(), "0.15");
        assert_eq!(per_mtok("3e-06").unwrap(), "3");
        assert_eq!(per_mtok("0.000015").unwrap(), "15");
        assert_eq!(per_mtok("0").unwrap(), "0");
        assert_eq!(per_mtok("1.25E-5").unwrap(), "12.5");
        // Finer than a pico-USD per token: rounded up, never down.
        assert_eq!(per_mtok("1e-13").unwrap(), "0.000001");
        assert_eq!(per_mtok("3.3333e-8").unwrap(), "0.033333");
        assert!(per_mtok("-1e-6").is_err());
        assert!(per_mtok("abc").is_err());
    }

    #[test]
    fn the_builtin_table_parses_and_names_its_source() {
        let table = PriceTable::builtin();
        assert_eq!(table.source.licence, "MIT");
        assert!(!table.source.retrieved.is_empty());
        assert!(table.get("openai/gpt-4o-mini").is_some());
    }

    #[test]
    fn old_tables_load_and_bad_capabilities_are_refused() {
        let old = "[source]\nname = \"n\"\nurl = \"u\"\nrelease = \"r\"\nlicence = \"MIT\"\ncopyright = \"c\"\nretrieved = \"2026-01-01\"\n\
                   [prices.\"openai/x\"]\nkey = \"x\"\ninput = \"1\"\noutput = \"2\"\n";
        let table = PriceTable::parse(old).unwrap();
        assert_eq!(table.get("openai/x").unwrap().output, "2");
        assert!(table.to_toml().contains("[models.\"openai/x\"]"));
        let bad = old.replace("output = \"2\"", "output = \"2\"\ncapabilities = [\"telepathy\"]");
        assert!(PriceTable::parse(&bad).is_err());
        assert!(PriceTable::parse(&old.replace("openai/x", "x")).is_err());
    }
}
