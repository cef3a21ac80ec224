//! The HTTP `date` header → Unix seconds for `created`. Cohere's answers carry
//! no timestamp and the adapter has no clock (every WASI import traps), so the
//! time comes from the response head.

/// `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(text: &str) -> Option<u64> {
    let mut fields = text.split_whitespace().skip(1);
    let day: u32 = fields.next()?.parse().ok()?;
    let month = match fields.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = fields.next()?.parse().ok()?;
    let clock = hms(fields.next()?)?;
    u64::try_from(unix(year, month, day, clock)?).ok()
}

fn hms(clock: &str) -> Option<i64> {
    let mut it = clock.splitn(3, ':');
    let (h, m, s): (i64, i64, i64) = (
        it.next()?.parse().ok()?,
        it.next()?.parse().ok()?,
        it.next()?.parse().ok()?,
    );
    ((0..24).contains(&h) && (0..60).contains(&m) && (0..61).contains(&s)).then_some(h * 3600 + m * 60 + s)
}

/// Seconds since 1970-01-01 (days from civil date, Howard Hinnant's method).
fn unix(year: i64, month: u32, day: u32, seconds_of_day: i64) -> Option<i64> {
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + seconds_of_day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_dates() {
        assert_eq!(http_date("Wed, 18 Jun 2025 10:11:12 GMT"), Some(1_750_241_472));
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(http_date("Wed, 18 Foo 2025 10:11:12 GMT"), None);
        assert_eq!(http_date("yesterday"), None);
    }
}
