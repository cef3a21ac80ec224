//! Exact money. Wallet amounts are nano-USD (1e-9) in `i64`; prices are pico-USD
//! (1e-12) per token in `u64`. Nothing here touches floating point: the decimal
//! strings users write are parsed exactly, and amounts are shown exactly.

use std::fmt;

/// Pico-USD per token. "0.50" USD per million tokens is 500_000 pico-USD per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct PicoPerToken(pub u64);

/// An amount in nano-USD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
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
fn parse_scaled(text: &str, scale: u32) -> Result<u128, MoneyError> {
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
    let overflow = || MoneyError::Overflow(text.to_string());
    let whole_value: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| overflow())?
    };
    let mut frac_value: u128 = 0;
    for digit in significant_frac.bytes() {
        frac_value = frac_value * 10 + u128::from(digit - b'0');
    }
    frac_value *= 10u128.pow(scale - significant_frac.len() as u32);
    whole_value
        .checked_mul(10u128.pow(scale))
        .and_then(|v| v.checked_add(frac_value))
        .ok_or_else(overflow)
}

impl PicoPerToken {
    /// From USD per million tokens, e.g. "0.50". USD/Mtok × 10^12 pico / 10^6 tokens
    /// = USD/Mtok × 10^6, so six decimal places are exact.
    pub fn from_usd_per_mtok(text: &str) -> Result<Self, MoneyError> {
        let value = parse_scaled(text, 6)?;
        u64::try_from(value)
            .map(Self)
            .map_err(|_| MoneyError::Overflow(text.to_string()))
    }

    /// USD per million tokens, as an exact decimal string.
    pub fn usd_per_mtok(self) -> String {
        format_scaled(u128::from(self.0), 6)
    }

    /// USD per token, as an exact decimal string (OpenRouter's `pricing.prompt` form).
    pub fn usd_per_token(self) -> String {
        format_scaled(u128::from(self.0), 12)
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

/// Token counts by kind for one exchange.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenCounts {
    pub input: u64,
    pub output: u64,
}

/// A model's price, frozen for the life of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Price {
    pub input: PicoPerToken,
    pub output: PicoPerToken,
}

impl Price {
    /// ceil(Σ tokens × pico-per-token / 1000) nano-USD: rounding up to a whole
    /// nano-USD means we never bill less than the provider charges us. Each
    /// product fits in u128, their sum may not (token counts come from the
    /// adapter): past it, as past i64, the cost is the largest amount.
    pub fn cost(&self, tokens: TokenCounts) -> Nanos {
        let input = u128::from(tokens.input) * u128::from(self.input.0);
        let output = u128::from(tokens.output) * u128::from(self.output.0);
        let nanos = input.checked_add(output).map_or(u128::MAX, |pico| pico.div_ceil(1000));
        Nanos(i64::try_from(nanos).unwrap_or(i64::MAX))
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
        let price = Price {
            input: PicoPerToken(500_000),
            output: PicoPerToken(1_500_000),
        };
        // 10 × 0.5 µUSD + 3 × 1.5 µUSD = 9.5 µUSD = 9500 nano.
        assert_eq!(price.cost(TokenCounts { input: 10, output: 3 }), Nanos(9_500));
        let odd = Price {
            input: PicoPerToken(1),
            output: PicoPerToken(0),
        };
        assert_eq!(odd.cost(TokenCounts { input: 1, output: 0 }), Nanos(1));
        assert_eq!(odd.cost(TokenCounts { input: 1000, output: 0 }), Nanos(1));
        assert_eq!(odd.cost(TokenCounts { input: 1001, output: 0 }), Nanos(2));
        assert_eq!(odd.cost(TokenCounts::default()), Nanos(0));
    }

    /// Found by `fuzz/money`: two products near u64::MAX² overflowed their u128
    /// sum (a panic with overflow checks, a tiny wrapped cost without). The
    /// words are the crash input's (all 0xff).
    #[test]
    fn cost_saturates_instead_of_overflowing() {
        let price = Price {
            input: PicoPerToken(u64::MAX),
            output: PicoPerToken(u64::MAX),
        };
        let tokens = TokenCounts {
            input: u64::MAX,
            output: u64::MAX,
        };
        assert_eq!(price.cost(tokens), Nanos(i64::MAX));
        assert_eq!(
            price.cost(TokenCounts { input: 1, output: 0 }),
            Nanos(18_446_744_073_709_552)
        );
    }
}
