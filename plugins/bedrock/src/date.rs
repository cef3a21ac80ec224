//! The `date` response header as Unix seconds. Adapters have no clock (every
//! WASI import traps), and Converse answers carry no timestamp, so a
//! completion's `created` comes from the HTTP `date` header.

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, the only form
/// HTTP/1.1 servers send); `None` for anything else.
pub fn unix_seconds(date: &str) -> Option<u64> {
    let (_weekday, rest) = date.trim().split_once(", ")?;
    let mut fields = rest.split(' ');
    let day: u64 = fields.next()?.parse().ok()?;
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
    let year: u64 = fields.next()?.parse().ok()?;
    let mut clock = fields.next()?.split(':').map(|f| f.parse::<u64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if fields.next()? != "GMT" || !(1..=31).contains(&day) || year < 1970 || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`, for years from 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12; // March = 0
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_imf_fixdate() {
        assert_eq!(unix_seconds("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(unix_seconds("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(unix_seconds("Tue, 29 Feb 2028 12:00:01 GMT"), Some(1_835_438_401));
        assert_eq!(unix_seconds("Mon, 23 Nov 2026 09:49:45 GMT"), Some(1_795_427_385));
        for bad in [
            "",
            "yesterday",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
        ] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
    }
}
