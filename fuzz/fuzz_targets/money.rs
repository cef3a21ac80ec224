//! Decimal USD parsing and formatting (`Nanos`, `PicoPerToken`) and cost
//! rounding (`Price::cost`). Parsing never panics; what parses prints back to
//! the same amount and reparses to it; the prices and wallet parsers agree on
//! what is a decimal; cost is exactly ceil(Σ tokens × price / 1000).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_gateway::fuzzing::{MoneyError, Nanos, PicoPerToken, Price, TokenCounts};

/// The decimal a valid amount text means, written canonically: no leading
/// zeros in the whole part ("0" if none), no trailing zeros in the fraction,
/// and no '.' when there is no fraction.
fn canonical(text: &str) -> String {
    let (whole, frac) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        whole.to_string()
    } else {
        format!("{whole}.{frac}")
    }
}

/// `digits` with a '.' `scale` places from the right, as an integer.
fn unscaled(text: &str, scale: usize) -> u128 {
    let (whole, frac) = text.split_once('.').expect("formatted amounts have a '.'");
    assert_eq!(frac.len(), scale, "{text}");
    assert!(
        !whole.is_empty() && whole.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()),
        "{text}"
    );
    assert!(whole == "0" || !whole.starts_with('0'), "{text}");
    format!("{whole}{frac}").parse().unwrap()
}

fn check_text(text: &str) {
    let nanos = Nanos::from_usd(text);
    let price = PicoPerToken::from_usd_per_mtok(text);
    let not_decimal = |r: Result<(), &MoneyError>| matches!(r, Err(MoneyError::NotDecimal(_)));
    assert_eq!(
        not_decimal(nanos.as_ref().map(|_| ())),
        not_decimal(price.as_ref().map(|_| ())),
        "the parsers disagree on whether {text:?} is a decimal"
    );
    if let Ok(nanos) = nanos {
        assert!(nanos.0 >= 0);
        assert_eq!(Nanos::from_usd(&nanos.usd_string()), Ok(nanos));
        assert_eq!(Nanos::from_usd(&nanos.usd_decimal()), Ok(nanos));
        assert_eq!(nanos.usd_decimal(), canonical(text), "{text:?}");
    }
    if let Ok(price) = price {
        assert_eq!(PicoPerToken::from_usd_per_mtok(&price.usd_per_mtok()), Ok(price));
        assert_eq!(canonical(&price.usd_per_mtok()), canonical(text), "{text:?}");
    }
}

fn check_amounts(data: &[u8]) {
    let mut words = data.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap()));
    let (Some(a), Some(b), Some(c), Some(d)) = (words.next(), words.next(), words.next(), words.next()) else {
        return;
    };
    let nanos = Nanos(a as i64);
    let text = nanos.usd_string();
    assert_eq!(
        unscaled(text.trim_start_matches('-'), 9),
        u128::from(nanos.0.unsigned_abs())
    );
    assert_eq!(text.starts_with('-'), nanos.0 < 0);
    if nanos.0 >= 0 {
        assert_eq!(Nanos::from_usd(&text), Ok(nanos));
        assert_eq!(Nanos::from_usd(&nanos.usd_decimal()), Ok(nanos));
    } else {
        assert!(Nanos::from_usd(&text).is_err(), "negative amounts do not parse");
    }
    let price = PicoPerToken(b);
    assert_eq!(PicoPerToken::from_usd_per_mtok(&price.usd_per_mtok()), Ok(price));
    assert_eq!(unscaled(&price.usd_per_mtok(), 6), u128::from(b));
    assert_eq!(unscaled(&price.usd_per_token(), 12), u128::from(b));

    let price = Price::tokens(PicoPerToken(b), PicoPerToken(c));
    let tokens = TokenCounts {
        input: d,
        output: a,
        ..TokenCounts::default()
    };
    // Each product fits in u128; their sum may not, and then (as past i64)
    // the cost is the largest amount.
    let pico = (u128::from(d) * u128::from(b)).checked_add(u128::from(a) * u128::from(c));
    let expected = pico.map_or(i64::MAX, |p| i64::try_from(p.div_ceil(1000)).unwrap_or(i64::MAX));
    let cost = price.cost(tokens);
    assert_eq!(cost.0, expected);
    assert!(cost.0 >= 0);
    // Never less than the provider charges: cost × 1000 covers the pico total
    // (unless clamped at the largest amount).
    assert!(cost.0 == i64::MAX || u128::try_from(cost.0).unwrap() * 1000 >= pico.unwrap());
    let more = TokenCounts {
        input: d.saturating_add(1),
        ..tokens
    };
    assert!(price.cost(more) >= cost, "more tokens cost less");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        check_text(text);
    }
    check_amounts(data);
});
