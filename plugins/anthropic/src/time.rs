//! The HTTP `date` header → Unix seconds for `created`. The adapter has no
//! clock (every WASI import traps) and Anthropic's messages carry no
//! timestamp, so the response head is the only source of time.

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
    let mut clock = fields.next()?.splitn(3, ':');
    let h: i64 = clock.next()?.parse().ok()?;
    let m: i64 = clock.next()?.parse().ok()?;
    let s: i64 = clock.next()?.parse().ok()?;
    if !(0..24).contains(&h) || !(0..60).contains(&m) || !(0..61).contains(&s) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()
}

/// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::http_date;

    #[test]
    fn imf_fixdate() {
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(http_date("Mon, 23 Nov 2026 09:31:58 GMT"), Some(1_795_426_318));
        assert_eq!(http_date("garbage"), None);
    }
}
