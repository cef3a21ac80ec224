//! A request's provider preferences, the `provider` object of the body in
//! OpenRouter's shape, so clients written for it work unchanged:
//! `order`, `only`, `ignore`, `sort`, `max_price`, `allow_fallbacks` and
//! `require_parameters`.
//!
//! Fields OpenRouter has and Tollgate cannot honour (`data_collection`,
//! `zdr`, `quantizations`, …) are refused by name rather than ignored: a
//! caller who asked for a data policy must not get a provider that breaks it.

use serde::Deserialize;
use serde_json::value::RawValue;
use tollgate_core::money::{Nanos, PicoPerToken};

/// Most names `order`, `only` or `ignore` may list.
const MAX_NAMES: usize = 32;

#[derive(Debug, Default)]
pub struct Preferences {
    /// Providers (or `provider/model` ids) to try first, in this order.
    pub order: Vec<String>,
    /// When set, only these providers may serve.
    pub only: Option<Vec<String>>,
    pub ignore: Vec<String>,
    pub sort: Option<Sort>,
    pub max_price: MaxPrice,
    /// False: no candidate beyond the first (or beyond those `order` names).
    pub allow_fallbacks: bool,
    /// Skip candidates whose model cannot honour the request's tools,
    /// response format or images.
    pub require_parameters: bool,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Sort {
    Price,
    Latency,
    Throughput,
}

impl Sort {
    pub fn name(self) -> &'static str {
        match self {
            Sort::Price => "price",
            Sort::Latency => "latency",
            Sort::Throughput => "throughput",
        }
    }

    /// The routing decision's strategy when this sort chose.
    pub fn strategy(self) -> &'static str {
        match self {
            Sort::Price => "sort:price",
            Sort::Latency => "sort:latency",
            Sort::Throughput => "sort:throughput",
        }
    }
}

/// The most a caller will pay: USD per million prompt and completion tokens
/// and USD per request, each exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaxPrice {
    pub prompt: Option<PicoPerToken>,
    pub completion: Option<PicoPerToken>,
    pub request: Option<Nanos>,
}

impl MaxPrice {
    pub fn is_set(&self) -> bool {
        *self != MaxPrice::default()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw<'a> {
    #[serde(default)]
    order: Vec<String>,
    #[serde(default)]
    only: Option<Vec<String>>,
    #[serde(default)]
    ignore: Vec<String>,
    #[serde(default)]
    sort: Option<Sort>,
    #[serde(borrow, default)]
    max_price: Option<RawMaxPrice<'a>>,
    #[serde(default)]
    allow_fallbacks: Option<bool>,
    #[serde(default)]
    require_parameters: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMaxPrice<'a> {
    #[serde(borrow, default)]
    prompt: Option<&'a RawValue>,
    #[serde(borrow, default)]
    completion: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request: Option<&'a RawValue>,
}

/// Why a `provider` object was refused; the message names the field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PreferenceError(pub String);

impl Preferences {
    /// Reads the `provider` object.
    pub fn parse(json: &str) -> Result<Self, PreferenceError> {
        // serde's derive also reads a struct from an array; an array is not preferences.
        if !json.trim_start().starts_with('{') {
            return Err(PreferenceError("'provider' must be an object".into()));
        }
        let raw: Raw<'_> = serde_json::from_str(json).map_err(|e| {
            PreferenceError(format!(
                "'provider' is not valid provider preferences: {e} (supported: order, only, ignore, sort, \
                 max_price, allow_fallbacks, require_parameters)"
            ))
        })?;
        for (field, names) in [
            ("order", Some(&raw.order)),
            ("only", raw.only.as_ref()),
            ("ignore", Some(&raw.ignore)),
        ] {
            let Some(names) = names else { continue };
            if names.len() > MAX_NAMES {
                return Err(PreferenceError(format!(
                    "'provider.{field}' lists more than {MAX_NAMES} names"
                )));
            }
            if names.iter().any(String::is_empty) {
                return Err(PreferenceError(format!("'provider.{field}' has an empty name")));
            }
        }
        let max_price = match raw.max_price {
            None => MaxPrice::default(),
            Some(max) => MaxPrice {
                prompt: max.prompt.map(|v| per_mtok(v, "prompt")).transpose()?,
                completion: max.completion.map(|v| per_mtok(v, "completion")).transpose()?,
                request: max
                    .request
                    .map(|v| {
                        Nanos::from_usd(decimal(v)).map_err(|e| {
                            PreferenceError(format!("'provider.max_price.request' is not a USD amount: {e}"))
                        })
                    })
                    .transpose()?,
            },
        };
        Ok(Preferences {
            order: raw.order,
            only: raw.only,
            ignore: raw.ignore,
            sort: raw.sort,
            max_price,
            allow_fallbacks: raw.allow_fallbacks.unwrap_or(true),
            require_parameters: raw.require_parameters.unwrap_or(false),
        })
    }

    /// Whether these preferences let `provider` (or the model `route_id`) serve.
    pub fn admits(&self, provider: &str, route_id: &str) -> bool {
        let named = |names: &[String]| names.iter().any(|n| n == provider || n == route_id);
        self.only.as_deref().is_none_or(named) && !named(&self.ignore)
    }

    /// Where `order` puts a candidate: its position, or after every named one.
    pub fn rank(&self, provider: &str, route_id: &str) -> usize {
        self.order
            .iter()
            .position(|n| n == provider || n == route_id)
            .unwrap_or(self.order.len())
    }
}

/// A number or a decimal string, as written (never through a float).
fn decimal(value: &RawValue) -> &str {
    let text = value.get();
    text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text)
}

fn per_mtok(value: &RawValue, field: &str) -> Result<PicoPerToken, PreferenceError> {
    PicoPerToken::from_usd_per_mtok(decimal(value)).map_err(|e| {
        PreferenceError(format!(
            "'provider.max_price.{field}' is not a USD price per million tokens: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_openrouters_shape_with_exact_prices() {
        let prefs = Preferences::parse(
            r#"{"order":["b","a"],"ignore":["c"],"sort":"price","allow_fallbacks":false,
                "max_price":{"prompt":0.15,"completion":"0.6","request":0.001}}"#,
        )
        .unwrap();
        assert_eq!(prefs.sort, Some(Sort::Price));
        assert!(!prefs.allow_fallbacks && !prefs.require_parameters);
        assert_eq!(prefs.max_price.prompt, Some(PicoPerToken(150_000)));
        assert_eq!(prefs.max_price.completion, Some(PicoPerToken(600_000)));
        assert_eq!(prefs.max_price.request, Some(Nanos(1_000_000)));
        assert_eq!(prefs.rank("a", "a/m"), 1);
        assert_eq!(prefs.rank("z", "z/m"), 2);
        assert!(prefs.admits("a", "a/m") && !prefs.admits("c", "c/m"));
        let only = Preferences::parse(r#"{"only":["a/m"]}"#).unwrap();
        assert!(only.admits("a", "a/m") && !only.admits("a", "a/n"));
        assert!(Preferences::parse("{}").unwrap().allow_fallbacks);
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        for (json, says) in [
            (r#"{"data_collection":"deny"}"#, "data_collection"),
            (r#"{"sort":"fastest"}"#, "fastest"),
            (r#"{"max_price":{"prompt":-1}}"#, "max_price.prompt"),
            (r#"{"max_price":{"image":1}}"#, "image"),
            (r#"{"order":[""]}"#, "empty name"),
            (r#"[]"#, "provider"),
        ] {
            let error = Preferences::parse(json).unwrap_err().0;
            assert!(error.contains(says), "{json}: {error}");
        }
    }
}
