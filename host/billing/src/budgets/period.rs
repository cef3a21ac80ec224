//! Budget periods (the UTC calendar day or month) and the exact arithmetic
//! of alert thresholds.

use chrono::{DateTime, Datelike, TimeZone, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tollgate_core::money::Nanos;

use super::{DEFAULT_ALERTS, MAX_ALERTS};

/// A budget's period: the UTC calendar day or month.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Daily,
    Monthly,
}

impl Period {
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Daily => "daily",
            Period::Monthly => "monthly",
        }
    }

    pub(super) fn parse(text: &str) -> Option<Period> {
        match text {
            "daily" => Some(Period::Daily),
            "monthly" => Some(Period::Monthly),
            _ => None,
        }
    }

    /// The period `now` falls in, as its row key: `YYYY-MM-DD` or `YYYY-MM`.
    pub fn key(self, now: DateTime<Utc>) -> String {
        match self {
            Period::Daily => format!("{:04}-{:02}-{:02}", now.year(), now.month(), now.day()),
            Period::Monthly => format!("{:04}-{:02}", now.year(), now.month()),
        }
    }

    /// The start (inclusive) and end (exclusive) of the period `now` falls in.
    pub fn bounds(self, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let day = Utc
            .with_ymd_and_hms(now.year(), now.month(), now.day(), 0, 0, 0)
            .single()
            .expect("midnight UTC exists");
        match self {
            Period::Daily => (day, day + chrono::Days::new(1)),
            Period::Monthly => {
                let start = day - chrono::Days::new(u64::from(now.day() - 1));
                (start, start + chrono::Months::new(1))
            }
        }
    }
}

/// Whether `spent` reaches `percent`% of `limit`, exactly.
pub fn crossed(spent: Nanos, limit: Nanos, percent: u32) -> bool {
    i128::from(spent.0) * 100 >= i128::from(limit.0) * i128::from(percent)
}

/// `percent`% of `limit`, rounded up to the nano-USD (the least spend that
/// crosses it).
pub fn threshold(limit: Nanos, percent: u32) -> Nanos {
    let scaled = i128::from(limit.0) * i128::from(percent);
    Nanos(i64::try_from((scaled + 99) / 100).unwrap_or(i64::MAX))
}

/// Checks and normalises alert thresholds: 1 to 100 percent, at most
/// [`MAX_ALERTS`], sorted without repeats.
pub fn alert_thresholds(given: Option<Vec<u32>>) -> Result<Vec<u32>, String> {
    let mut thresholds = given.unwrap_or_else(|| DEFAULT_ALERTS.to_vec());
    if let Some(bad) = thresholds.iter().find(|p| !(1..=100).contains(*p)) {
        return Err(format!("alert threshold {bad} is not a percent from 1 to 100"));
    }
    thresholds.sort_unstable();
    thresholds.dedup();
    if thresholds.len() > MAX_ALERTS {
        return Err(format!("at most {MAX_ALERTS} alert thresholds"));
    }
    Ok(thresholds)
}

/// The bounds of the period whose key is `key`.
pub(super) fn period_bounds(period: Period, key: &str) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let day = match period {
        Period::Daily => format!("{key}T00:00:00Z"),
        Period::Monthly => format!("{key}-01T00:00:00Z"),
    };
    let at = DateTime::parse_from_rfc3339(&day).ok()?.with_timezone(&Utc);
    Some(period.bounds(at))
}
