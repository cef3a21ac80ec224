//! Prices of the model operations besides chat, in their own units: an
//! image (by quality and size), a character of speech, a second of audio
//! transcribed, a search. Exact integers like token prices: an amount finer
//! than a nano-USD is rounded up once, on the total.

use crate::money::{MoneyError, Nanos, PicoPerToken};

/// One image price: for a quality and size, either of which may be any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImagePrice {
    /// E.g. `hd`, `standard`, `low`; `None` for any quality.
    pub quality: Option<String>,
    /// E.g. `1024x1024`; `None` for any size.
    pub size: Option<String>,
    pub price: Nanos,
}

/// A model's unit prices (empty for a model priced by tokens only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnitPrices {
    pub images: Vec<ImagePrice>,
    /// Per character of text turned into speech (pico-USD; quoted in USD
    /// per million characters, like tokens).
    pub per_character: Option<PicoPerToken>,
    /// Per second of audio, in nano-USD: the same number is pico-USD per
    /// millisecond, the unit adapters measure in.
    pub per_audio_second: Option<Nanos>,
    pub per_search: Option<Nanos>,
}

/// What an operation consumed, in the units it is priced in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitCounts {
    pub images: u64,
    pub characters: u64,
    pub audio_ms: u64,
    pub searches: u64,
}

impl ImagePrice {
    /// From a table key: `quality/size`, `size` (a `WxH`), `quality`, or `*`.
    pub fn parse(key: &str, usd: &str) -> Result<Self, MoneyError> {
        let is_size = |s: &str| {
            s.split_once('x')
                .is_some_and(|(w, h)| w.parse::<u32>().is_ok() && h.parse::<u32>().is_ok())
        };
        let (quality, size) = match key.split_once('/') {
            Some((quality, size)) => (Some(quality), Some(size)),
            None if key == "*" => (None, None),
            None if is_size(key) => (None, Some(key)),
            None => (Some(key), None),
        };
        Ok(ImagePrice {
            quality: quality.map(str::to_string),
            size: size.map(str::to_string),
            price: Nanos::from_usd(usd)?,
        })
    }

    /// The table key this price was read from.
    pub fn key(&self) -> String {
        match (&self.quality, &self.size) {
            (Some(quality), Some(size)) => format!("{quality}/{size}"),
            (Some(quality), None) => quality.clone(),
            (None, Some(size)) => size.clone(),
            (None, None) => "*".to_string(),
        }
    }
}

impl UnitPrices {
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
            && self.per_character.is_none()
            && self.per_audio_second.is_none()
            && self.per_search.is_none()
    }

    /// The price of one image of `quality` and `size` (either unset: the
    /// request leaves it to the provider's default), the most specific price
    /// that matches. An unset quality or size matches only a price for any,
    /// unless the model has one price for it alone. `None`: not priced.
    pub fn image(&self, quality: Option<&str>, size: Option<&str>) -> Option<Nanos> {
        let matches = |want: Option<&str>, have: &Option<String>| match (want, have) {
            (_, None) => Some(0),
            (Some(want), Some(have)) if want == have => Some(1),
            _ => None,
        };
        self.images
            .iter()
            .filter_map(|p| Some((matches(quality, &p.quality)? + matches(size, &p.size)?, p.price)))
            .max_by_key(|(specificity, price)| (*specificity, *price))
            .map(|(_, price)| price)
            .or_else(|| match (quality, size) {
                // The provider's default: the dearest price it could be.
                (None, _) | (_, None) => self
                    .images
                    .iter()
                    .filter(|p| {
                        quality.is_none_or(|q| p.quality.as_deref().is_none_or(|h| h == q))
                            && size.is_none_or(|s| p.size.as_deref().is_none_or(|h| h == s))
                    })
                    .map(|p| p.price)
                    .max(),
                _ => None,
            })
    }

    /// The cost of `counts`, `image` being the price of each image.
    pub fn cost(&self, counts: UnitCounts, image: Nanos) -> Nanos {
        let pico = u128::from(counts.images) * nanos(image) * 1000
            + u128::from(counts.characters) * u128::from(self.per_character.map_or(0, |p| p.0))
            + u128::from(counts.audio_ms) * self.per_audio_second.map_or(0, nanos)
            + u128::from(counts.searches) * self.per_search.map_or(0, nanos) * 1000;
        Nanos(i64::try_from(pico.div_ceil(1000)).unwrap_or(i64::MAX))
    }
}

fn nanos(amount: Nanos) -> u128 {
    u128::try_from(amount.0.max(0)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices() -> UnitPrices {
        UnitPrices {
            images: vec![
                ImagePrice::parse("standard/1024x1024", "0.04").unwrap(),
                ImagePrice::parse("hd/1024x1024", "0.08").unwrap(),
                ImagePrice::parse("hd/1792x1024", "0.12").unwrap(),
            ],
            per_character: Some(PicoPerToken::from_usd_per_mtok("15").unwrap()),
            per_audio_second: Some(Nanos::from_usd("0.0001").unwrap()),
            per_search: Some(Nanos::from_usd("0.002").unwrap()),
        }
    }

    #[test]
    fn images_are_priced_by_the_most_specific_match_or_the_dearest_default() {
        let p = prices();
        assert_eq!(p.image(Some("hd"), Some("1024x1024")), Some(Nanos(80_000_000)));
        assert_eq!(p.image(Some("standard"), Some("1024x1024")), Some(Nanos(40_000_000)));
        assert_eq!(p.image(Some("standard"), Some("512x512")), None, "not priced");
        assert_eq!(
            p.image(None, Some("1024x1024")),
            Some(Nanos(80_000_000)),
            "any quality: the dearest"
        );
        assert_eq!(p.image(None, None), Some(Nanos(120_000_000)));
        let flat = UnitPrices {
            images: vec![ImagePrice::parse("*", "0.02").unwrap()],
            ..UnitPrices::default()
        };
        assert_eq!(flat.image(Some("hd"), Some("256x256")), Some(Nanos(20_000_000)));
        assert_eq!(ImagePrice::parse("1024x1024", "1").unwrap().key(), "1024x1024");
        assert_eq!(ImagePrice::parse("hd", "1").unwrap().key(), "hd");
    }

    #[test]
    fn unit_costs_are_exact_and_rounded_up_once() {
        let p = prices();
        let counts = UnitCounts {
            images: 2,
            characters: 11,
            audio_ms: 3_001,
            searches: 1,
        };
        // 2 × 0.04 + 11 × 0.000015 + 3.001 s × 0.0001 + 0.002 USD.
        assert_eq!(
            p.cost(counts, Nanos(40_000_000)),
            Nanos(80_000_000 + 165_000 + 300_100 + 2_000_000)
        );
        let third = UnitPrices {
            per_audio_second: Some(Nanos(1)),
            ..UnitPrices::default()
        };
        assert_eq!(
            third.cost(
                UnitCounts {
                    audio_ms: 1,
                    ..UnitCounts::default()
                },
                Nanos::ZERO
            ),
            Nanos(1),
            "rounded up"
        );
    }
}
