//! Timestamps → Unix seconds, for a completion's `created`. Adapters have no
//! clock (every WASI import traps), so the time comes from the answer: a
//! timestamp in its body (RFC 3339) when the protocol has one, else the HTTP
//! `date` header (IMF-fixdate).

/// `2025-06-18T10:11:12.123456Z` or with a `±hh:mm` offset.
pub fn rfc3339(text: &str) -> Option<u64> {
    let (date, rest) = text.split_once(['T', 't'])?;
    let (year, month, day) = ymd(date)?;
    let (clock, offset) = if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let split = rest.rfind(['+', '-'])?;
        let (clock, zone) = rest.split_at(split);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':')?;
        (
            clock,
            sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60),
        )
    };
    let clock = clock.split('.').next()?;
    let seconds = unix(year, month, day, hms(clock)?)? - offset;
    u64::try_from(seconds).ok()
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`: the IMF-fixdate, the only form HTTP/1.1
/// servers send; `None` for anything else.
pub fn http_date(text: &str) -> Option<u64> {
    let (_weekday, rest) = text.trim().split_once(", ")?;
    let mut fields = rest.split(' ');
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
    if fields.next()? != "GMT" || fields.next().is_some() {
        return None;
    }
    u64::try_from(unix(year, month, day, clock)?).ok()
}

fn ymd(date: &str) -> Option<(i64, u32, u32)> {
    let mut it = date.splitn(3, '-');
    Some((
        it.next()?.parse().ok()?,
        it.next()?.parse().ok()?,
        it.next()?.parse().ok()?,
    ))
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
    fn parses_timestamps() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339("2025-06-18T10:11:12.123456Z"), Some(1_750_241_472));
        assert_eq!(rfc3339("2025-06-18T12:11:12+02:00"), Some(1_750_241_472));
        assert_eq!(http_date("Wed, 18 Jun 2025 10:11:12 GMT"), Some(1_750_241_472));
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(http_date("Tue, 29 Feb 2028 12:00:01 GMT"), Some(1_835_438_401));
        assert_eq!(rfc3339("yesterday"), None);
        for bad in [
            "",
            "yesterday",
            "Wed, 18 Foo 2025 10:11:12 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }
}
