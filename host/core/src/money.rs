//! Exact money. Wallet amounts are nano-USD (1e-9) in `i64`; prices are pico-USD
//! (1e-12) per token in `u64`. Nothing here touches floating point: the decimal
//! strings users write are parsed exactly, and amounts are shown exactly.

use std::fmt;

/// Pico-USD per token. "0.50" USD per million tokens is 500_000 pico-USD per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct PicoPerToken(pub u64);

/// An amount in nano-USD. Serialized as its integer (the ledger's journal
/// stores amounts this way); shown to users with [`Nanos::usd_string`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Nanos(pub i64);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MoneyError {
    #[error("'{0}' is not a decimal amount (expected digits with an optional '.' fraction, e.g. \"0.50\")")]
    NotDecimal(String),
    #[error("'{0}' has more precision than {1} decimal places")]
    TooPrecise(String, u32),
    #[error("'{0}' is too large")]
    Overflow(String),
}

/// Parses a non-negative decimal string into an integer scaled by 10^`scale`,
/// refusing anything that would need rounding.
fn parse_scaled(text: &str, scale: u32) -> Result<u64, MoneyError> {
    let not_decimal = || MoneyError::NotDecimal(text.to_string());
    let (whole, frac) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    if whole.is_empty() && frac.is_empty() {
        return Err(not_decimal());
    }
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_decimal());
    }
    let significant_frac = frac.trim_end_matches('0');
    if significant_frac.len() > scale as usize {
        return Err(MoneyError::TooPrecise(text.to_string(), scale));
    }
    // Digit by digit, whole part then the fraction padded to `scale`: no
    // `str::parse` and no power of ten per call (prices parse per request).
    let digits = whole.bytes().chain(significant_frac.bytes());
    let padding = std::iter::repeat_n(b'0', scale as usize - significant_frac.len());
    digits
        .chain(padding)
        .try_fold(0u64, |value, digit| {
            value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
        })
        .ok_or_else(|| MoneyError::Overflow(text.to_string()))
}

impl PicoPerToken {
    /// From USD per million tokens, e.g. "0.50". USD/Mtok × 10^12 pico / 10^6 tokens
    /// = USD/Mtok × 10^6, so six decimal places are exact.
    pub fn from_usd_per_mtok(text: &str) -> Result<Self, MoneyError> {
        parse_scaled(text, 6).map(Self)
    }

    /// USD per million tokens, as an exact decimal string.
    pub fn usd_per_mtok(self) -> String {
        UsdPerMtok(self).to_string()
    }

    /// USD per token, as an exact decimal string (OpenRouter's `pricing.prompt` form).
    pub fn usd_per_token(self) -> String {
        format_scaled(u128::from(self.0), 12)
    }
}

/// A price shown as USD per million tokens, an exact decimal ("0.500000"),
/// written straight into a larger text without a string of its own.
#[derive(Clone, Copy, Debug)]
pub struct UsdPerMtok(pub PicoPerToken);

impl std::fmt::Display for UsdPerMtok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Six decimals of a u64: no 128-bit division on the routing path.
        let pico = self.0.0;
        write!(f, "{}.{:06}", pico / 1_000_000, pico % 1_000_000)
    }
}

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);

    pub fn from_usd(text: &str) -> Result<Self, MoneyError> {
        let value = parse_scaled(text, 9)?;
        i64::try_from(value)
            .map(Self)
            .map_err(|_| MoneyError::Overflow(text.to_string()))
    }

    /// Exact USD with nine decimals, e.g. "0.000001250".
    pub fn usd_string(self) -> String {
        let sign = if self.0 < 0 { "-" } else { "" };
        format!("{sign}{}", format_scaled(u128::from(self.0.unsigned_abs()), 9))
    }

    /// Exact USD without trailing zeros, e.g. "0.00000125" or "3": the text of a
    /// JSON number that equals the amount.
    pub fn usd_decimal(self) -> String {
        let text = self.usd_string();
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.usd_string())
    }
}

fn format_scaled(value: u128, scale: u32) -> String {
    let unit = 10u128.pow(scale);
    format!("{}.{:0width$}", value / unit, value % unit, width = scale as usize)
}

/// Token counts by kind for one exchange. `input` counts every prompt token
/// and `output` every generated one; `cache_read` and `cache_write` are the
/// parts of `input` read from and written to a prompt cache, `reasoning` the
/// part of `output` spent thinking (as adapters report them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenCounts {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

/// A model's price, frozen for the life of one request. A kind without a
/// price of its own is billed at the price of what it is part of: cache reads
/// and writes at `input`, reasoning at `output`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Price {
    pub input: PicoPerToken,
    pub output: PicoPerToken,
    pub cache_read: Option<PicoPerToken>,
    pub cache_write: Option<PicoPerToken>,
    pub reasoning: Option<PicoPerToken>,
    /// A fee per request, on top of the tokens.
    pub per_request: Nanos,
}

/// The kinds a cost is made of, in the order a breakdown lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Input,
    CacheRead,
    CacheWrite,
    Output,
    Reasoning,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Input,
        Kind::CacheRead,
        Kind::CacheWrite,
        Kind::Output,
        Kind::Reasoning,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Input => "input",
            Kind::CacheRead => "cache_read",
            Kind::CacheWrite => "cache_write",
            Kind::Output => "output",
            Kind::Reasoning => "reasoning",
        }
    }
}

/// One kind's share of a cost: its tokens and their exact price in pico-USD
/// (before the total is rounded up to whole nano-USD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindCost {
    pub kind: Kind,
    pub tokens: u64,
    pub price: PicoPerToken,
    pub pico: u128,
}

impl Price {
    /// A price for input and output tokens only.
    pub fn tokens(input: PicoPerToken, output: PicoPerToken) -> Self {
        Price {
            input,
            output,
            ..Price::default()
        }
    }

    /// The price `kind` is billed at.
    pub fn of(&self, kind: Kind) -> PicoPerToken {
        match kind {
            Kind::Input => self.input,
            Kind::CacheRead => self.cache_read.unwrap_or(self.input),
            Kind::CacheWrite => self.cache_write.unwrap_or(self.input),
            Kind::Output => self.output,
            Kind::Reasoning => self.reasoning.unwrap_or(self.output),
        }
    }

    /// Whether any kind but input and output has a price of its own.
    pub fn has_kinds(&self) -> bool {
        self.cache_read.is_some() || self.cache_write.is_some() || self.reasoning.is_some() || self.per_request.0 != 0
    }

    /// Each kind's tokens and exact cost. The parts are clamped to their
    /// whole (an adapter's counts are not trusted to add up): cache reads,
    /// then cache writes, out of `input`; reasoning out of `output`.
    pub fn breakdown(&self, tokens: TokenCounts) -> [KindCost; 5] {
        let cache_read = tokens.cache_read.min(tokens.input);
        let cache_write = tokens.cache_write.min(tokens.input - cache_read);
        let reasoning = tokens.reasoning.min(tokens.output);
        let counts = [
            tokens.input - cache_read - cache_write,
            cache_read,
            cache_write,
            tokens.output - reasoning,
            reasoning,
        ];
        Kind::ALL.map(|kind| {
            let tokens = counts[kind as usize];
            let price = self.of(kind);
            KindCost {
                kind,
                tokens,
                price,
                pico: u128::from(tokens) * u128::from(price.0),
            }
        })
    }

    /// ceil(Σ tokens × pico-per-token / 1000) nano-USD, each kind at its own
    /// price, plus the per-request fee: rounding up to a whole nano-USD means
    /// we never bill less than the provider charges us. Each product fits in
    /// u128, their sum may not (token counts come from the adapter): past it,
    /// as past i64, the cost is the largest amount.
    pub fn cost(&self, tokens: TokenCounts) -> Nanos {
        let pico = self
            .breakdown(tokens)
            .iter()
            .try_fold(0u128, |sum, part| sum.checked_add(part.pico));
        let nanos = pico.map_or(u128::MAX, |pico| pico.div_ceil(1000));
        let nanos = i64::try_from(nanos).unwrap_or(i64::MAX);
        Nanos(nanos.saturating_add(self.per_request.0))
    }

    /// The most `tokens` can cost whatever share of them the upstream later
    /// reports as cached or reasoning: every input token at the dearest input
    /// kind, every output token at the dearest output kind. What a hold covers.
    pub fn worst_case(&self, tokens: TokenCounts) -> Nanos {
        let dearest = Price {
            input: self.input.max(self.of(Kind::CacheRead)).max(self.of(Kind::CacheWrite)),
            output: self.output.max(self.of(Kind::Reasoning)),
            per_request: self.per_request,
            ..Price::default()
        };
        dearest.cost(TokenCounts {
            input: tokens.input,
            output: tokens.output,
            ..TokenCounts::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prices_exactly() {
        assert_eq!(PicoPerToken::from_usd_per_mtok("0.50"), Ok(PicoPerToken(500_000)));
        assert_eq!(PicoPerToken::from_usd_per_mtok("15"), Ok(PicoPerToken(15_000_000)));
        assert_eq!(PicoPerToken::from_usd_per_mtok("0.000001"), Ok(PicoPerToken(1)));
        assert_eq!(PicoPerToken::from_usd_per_mtok(".5"), Ok(PicoPerToken(500_000)));
        assert_eq!(
            PicoPerToken::from_usd_per_mtok("0.0000001").unwrap_err(),
            MoneyError::TooPrecise("0.0000001".into(), 6)
        );
        assert!(PicoPerToken::from_usd_per_mtok("-1").is_err());
        assert!(PicoPerToken::from_usd_per_mtok("1e3").is_err());
        assert!(PicoPerToken::from_usd_per_mtok("").is_err());
        assert!(PicoPerToken::from_usd_per_mtok(".").is_err());
        assert_eq!(PicoPerToken(500_000).usd_per_mtok(), "0.500000");
        assert_eq!(PicoPerToken(500_000).usd_per_token(), "0.000000500000");
    }

    #[test]
    fn parses_and_prints_usd() {
        assert_eq!(Nanos::from_usd("10"), Ok(Nanos(10_000_000_000)));
        assert_eq!(PicoPerToken::from_usd_per_mtok(".5"), Ok(PicoPerToken(500_000)));
        assert_eq!(
            PicoPerToken::from_usd_per_mtok(" 007.250 "),
            Ok(PicoPerToken(7_250_000))
        );
        assert_eq!(
            PicoPerToken::from_usd_per_mtok("340282366920938463463374607431768211455"),
            Err(MoneyError::Overflow("340282366920938463463374607431768211455".into()))
        );
        assert_eq!(Nanos::from_usd("0.000000001"), Ok(Nanos(1)));
        assert!(Nanos::from_usd("0.0000000001").is_err());
        assert!(Nanos::from_usd("99999999999999999999").is_err());
        assert_eq!(Nanos(1_250).usd_string(), "0.000001250");
        assert_eq!(Nanos(-5).usd_string(), "-0.000000005");
        assert_eq!(Nanos(12_345).usd_decimal(), "0.000012345");
        assert_eq!(Nanos(3_000_000_000).usd_decimal(), "3");
        assert_eq!(Nanos(0).usd_decimal(), "0");
        assert_eq!(Nanos(1_500_000_000).usd_decimal(), "1.5");
    }

    #[test]
    fn cost_rounds_up_to_whole_nanos() {
        let price = Price::tokens(PicoPerToken(500_000), PicoPerToken(1_500_000));
        // 10 × 0.5 µUSD + 3 × 1.5 µUSD = 9.5 µUSD = 9500 nano.
        assert_eq!(price.cost(counts(10, 3)), Nanos(9_500));
        let odd = Price::tokens(PicoPerToken(1), PicoPerToken(0));
        assert_eq!(odd.cost(counts(1, 0)), Nanos(1));
        assert_eq!(odd.cost(counts(1000, 0)), Nanos(1));
        assert_eq!(odd.cost(counts(1001, 0)), Nanos(2));
        assert_eq!(odd.cost(TokenCounts::default()), Nanos(0));
    }

    fn counts(input: u64, output: u64) -> TokenCounts {
        TokenCounts {
            input,
            output,
            ..TokenCounts::default()
        }
    }

    #[test]
    fn each_kind_is_billed_at_its_price() {
        // Anthropic-style: cache reads 0.1×, writes 1.25× the $3 input price.
        let price = Price {
            input: PicoPerToken(3_000_000),
            output: PicoPerToken(15_000_000),
            cache_read: Some(PicoPerToken(300_000)),
            cache_write: Some(PicoPerToken(3_750_000)),
            reasoning: None,
            per_request: Nanos(5),
        };
        let tokens = TokenCounts {
            input: 1000,
            output: 10,
            cache_read: 800,
            cache_write: 100,
            reasoning: 4,
        };
        // 100 × 3 + 800 × 0.3 + 100 × 3.75 + 10 × 15 µUSD = 1065 µUSD, + 5 nano.
        assert_eq!(price.cost(tokens), Nanos(1_065_005));
        let parts = price.breakdown(tokens);
        assert_eq!(parts.map(|p| p.tokens), [100, 800, 100, 6, 4]);
        assert_eq!(parts[1].pico, 240_000_000);
        // Counts that do not add up are clamped, never underflow.
        let wild = TokenCounts {
            input: 5,
            output: 1,
            cache_read: 9,
            cache_write: 9,
            reasoning: 9,
        };
        assert_eq!(price.breakdown(wild).map(|p| p.tokens), [0, 5, 0, 0, 1]);
        // The hold prices every input token at the dearest input kind.
        assert_eq!(price.worst_case(counts(1000, 10)), Nanos(3_750_000 + 150_000 + 5));
        assert!(price.worst_case(counts(1000, 10)) >= price.cost(tokens));
    }

    /// Found by `fuzz/money`: two products near u64::MAX² overflowed their u128
    /// sum (a panic with overflow checks, a tiny wrapped cost without). The
    /// words are the crash input's (all 0xff).
    #[test]
    fn cost_saturates_instead_of_overflowing() {
        let price = Price::tokens(PicoPerToken(u64::MAX), PicoPerToken(u64::MAX));
        assert_eq!(price.cost(counts(u64::MAX, u64::MAX)), Nanos(i64::MAX));
        assert_eq!(price.cost(counts(1, 0)), Nanos(18_446_744_073_709_552));
    }
}
