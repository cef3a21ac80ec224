//! The phone-number finder, the loosest of the kinds: phone numbers have no
//! checksum, so it accepts the shapes numbers are written in and turns away
//! the look-alikes prose is full of (decimals, dates, versions, addresses).

use std::ops::Range;

use crate::detect::ends_token;

/// Phone numbers: `+` and a country code then 9 to 15 digits in all, in any
/// grouping; or national forms of 9 to 15 digits in at least two groups
/// separated by a space, dash or dot, or with an area code in parentheses.
/// Two plain groups count only with a trunk prefix (`030 1234567`), so a
/// decimal such as `3.14159265358` is no phone, nor is an IPv4 address or a
/// count such as `1 2 3 4 5 6 7 8 9`.
pub fn phones(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let startable = matches!(bytes[at], b'+' | b'(') || bytes[at].is_ascii_digit();
        let clear_before = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || b"+-._/@".contains(&bytes[at - 1]));
        if !(startable && clear_before) {
            at += 1;
            continue;
        }
        match phone_at(bytes, at) {
            Some((end, true)) => {
                found.push(at..end);
                at = end;
            }
            Some((end, false)) => at = end.max(at + 1),
            None => at += 1,
        }
    }
    found
}

/// Reads the grouped number starting at `start`: its end and whether it is
/// a phone number.
fn phone_at(bytes: &[u8], start: usize) -> Option<(usize, bool)> {
    let international = bytes[start] == b'+';
    let mut at = start + usize::from(international);
    // Each group's digit count, whether it was in parentheses, and the
    // separators seen.
    let mut groups: Vec<(usize, bool)> = Vec::new();
    let mut separators = Vec::new();
    loop {
        let group_start = at;
        let parenthesised = bytes.get(at) == Some(&b'(');
        at += usize::from(parenthesised);
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        let length = at - group_start - usize::from(parenthesised);
        if parenthesised {
            // Not an area code (`(mobile)`, `(4155552671)`): the number, if
            // any, ended before it.
            if bytes.get(at) != Some(&b')') || !(1..=5).contains(&length) {
                at = group_start;
                break;
            }
            at += 1;
        }
        if length == 0 {
            break;
        }
        groups.push((length, parenthesised));
        match bytes.get(at) {
            Some(&sep @ (b' ' | b'-' | b'.'))
                if bytes.get(at + 1).is_some_and(|b| b.is_ascii_digit() || *b == b'(') =>
            {
                separators.push(sep);
                at += 1;
            }
            Some(b'(' | b'0'..=b'9') if parenthesised => {}
            _ => break,
        }
    }
    let last = groups.len();
    if last == 0 {
        return None;
    }
    // A trailing separator that led nowhere is not the number's.
    let end = if matches!(bytes[at - 1], b' ' | b'-' | b'.') {
        at - 1
    } else {
        at
    };
    let total: usize = groups.iter().map(|(n, _)| n).sum();
    let any_parentheses = groups.iter().any(|(_, p)| *p);
    let dotted = separators.contains(&b'.');
    let plausible = ends_token(bytes, end)
        && (9..=15).contains(&total)
        // Only the first two groups (country or trunk code, area) may be a lone digit.
        && groups.iter().skip(2).all(|(n, _)| *n >= 2)
        && (!dotted || groups.iter().all(|(n, _)| *n >= 2))
        && !(dotted && last == 4 && groups.iter().all(|(n, _)| *n <= 3))
        && !(separators == b"--" && groups.iter().map(|(n, _)| *n).eq([3, 2, 4]))
        && (international
            || any_parentheses
            || last >= 3
            || (last == 2 && bytes[start] == b'0' && groups[0].0 >= 2));
    Some((end, plausible))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        phones(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn phones_in_common_forms() {
        for phone in [
            "+1 415 555 2671",
            "+14155552671",
            "+44 (0)20 7946 0958",
            "(415) 555-2671",
            "415-555-2671",
            "415.555.2671",
            "020 7946 0958",
            "07700 900123",
            "01 23 45 67 89",
            "1-800-555-0199",
        ] {
            assert_eq!(found(&format!("call {phone}, thanks")), [phone], "{phone}");
        }
        assert_eq!(found("call 415-555-2671 (mobile)"), ["415-555-2671"]);
        assert_eq!(found("(+1 415 555 2671)"), ["+1 415 555 2671"]);
    }

    #[test]
    fn numbers_that_are_not_phones() {
        for text in [
            "pi is 3.14159265358979",
            "host 192.168.100.200",
            "on 2024-01-15 at 10:30",
            "build 10.0.19041.1234",
            "count 1 2 3 4 5 6 7 8 9 10",
            "id 1700000000123",
            "version 12345 67890",
            "call 555-1234",
        ] {
            assert!(found(text).is_empty(), "{text}");
        }
    }
}
