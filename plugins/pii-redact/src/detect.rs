//! Finders for each kind of personal data, by hand-written scanners rather than
//! a regex engine: the sandbox traps on the random seed that `std`'s
//! `HashMap` (and so the `regex` crate) asks for, and each finder needs a
//! check a regex cannot express anyway (Luhn, ISO 7064 mod-97, SSN ranges).
//!
//! A finder answers byte ranges of `text`. Every range starts and ends next to
//! an ASCII byte, so it always falls on `char` boundaries.

use std::ops::Range;

/// The kinds of personal data, in the order they win an overlap: an e-mail
/// address holds digits a phone finder would also take, and a card number or
/// an SSN is a run of digits a phone finder would too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Email,
    Iban,
    Card,
    NationalId,
    Phone,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Email, Kind::Iban, Kind::Card, Kind::NationalId, Kind::Phone];

    /// The name in the `kinds` setting.
    pub fn setting(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Iban => "iban",
            Kind::Card => "card",
            Kind::NationalId => "national_id",
            Kind::Phone => "phone",
        }
    }

    /// The label inside a placeholder, e.g. `EMAIL` in `[EMAIL_1]`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Email => "EMAIL",
            Kind::Iban => "IBAN",
            Kind::Card => "CARD",
            Kind::NationalId => "NATIONAL_ID",
            Kind::Phone => "PHONE",
        }
    }

    pub fn find(self, text: &str) -> Vec<Range<usize>> {
        match self {
            Kind::Email => emails(text),
            Kind::Iban => ibans(text),
            Kind::Card => cards(text),
            Kind::NationalId => ssns(text),
            Kind::Phone => crate::phone::phones(text),
        }
    }
}

/// Whether the byte before `at` lets a token start there (none, or not a
/// letter or digit).
fn starts_token(bytes: &[u8], at: usize) -> bool {
    at == 0 || !bytes[at - 1].is_ascii_alphanumeric()
}

/// Whether the byte at `at` lets a token end just before it.
pub(crate) fn ends_token(bytes: &[u8], at: usize) -> bool {
    bytes.get(at).is_none_or(|b| !b.is_ascii_alphanumeric())
}

fn emails(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let local = |b: u8| b.is_ascii_alphanumeric() || b"._%+-".contains(&b);
    let domain = |b: u8| b.is_ascii_alphanumeric() || b == b'.' || b == b'-';
    let mut found = Vec::new();
    let mut from = 0;
    for at in memchr_all(bytes, b'@') {
        if at < from {
            continue;
        }
        let mut start = at;
        while start > from && local(bytes[start - 1]) {
            start -= 1;
        }
        // A sentence's "…end.alice@x.org" keeps its full stop out.
        while start < at && bytes[start] == b'.' {
            start += 1;
        }
        let mut end = at + 1;
        while end < bytes.len() && domain(bytes[end]) {
            end += 1;
        }
        while end > at + 1 && matches!(bytes[end - 1], b'.' | b'-') {
            end -= 1;
        }
        if start < at && valid_domain(&text[at + 1..end]) {
            found.push(start..end);
            from = end;
        }
    }
    found
}

fn memchr_all(bytes: &[u8], needle: u8) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter(move |(_, b)| **b == needle)
        .map(|(i, _)| i)
}

/// At least two labels, none empty or edged with `-`, ending in a top-level
/// domain of two or more letters.
fn valid_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-'))
        && labels
            .last()
            .is_some_and(|tld| tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// A run of digits with single separators from `separators` between them,
/// starting at `start`: its end, and the ends of its prefixes that stop just
/// before a separator and hold at most `max_digits` digits (shorter
/// candidates, longest first; bounded, so a long run costs one pass).
fn digit_run(bytes: &[u8], start: usize, separators: &[u8], max_digits: usize) -> (usize, Vec<usize>) {
    let mut end = start;
    let mut digits = 0;
    let mut cuts = Vec::new();
    while end < bytes.len() {
        if bytes[end].is_ascii_digit() {
            digits += 1;
            end += 1;
        } else if separators.contains(&bytes[end]) && end > start && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)
        {
            if digits <= max_digits {
                cuts.push(end);
            }
            end += 1;
        } else {
            break;
        }
    }
    cuts.reverse();
    (end, cuts)
}

fn digits(text: &[u8]) -> Vec<u8> {
    text.iter().filter(|b| b.is_ascii_digit()).map(|b| b - b'0').collect()
}

/// Card numbers: 13 to 19 digits, spaces or dashes allowed between them, that
/// pass the Luhn check (which random digit strings fail nine times in ten).
fn cards(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !bytes[at].is_ascii_digit() || !starts_token(bytes, at) || (at > 0 && bytes[at - 1] == b'+') {
            at += 1;
            continue;
        }
        let (end, cuts) = digit_run(bytes, at, b" -", 19);
        let card = std::iter::once(end)
            .filter(|&e| ends_token(bytes, e))
            .chain(cuts)
            .find(|&e| {
                let number = digits(&bytes[at..e]);
                (13..=19).contains(&number.len()) && card_grouping(&text[at..e]) && luhn(&number)
            });
        if let Some(e) = card {
            found.push(at..e);
        }
        at = end;
    }
    found
}

/// Cards are printed compact or in groups of 3 to 6 digits (4-4-4-4, Amex's
/// 4-6-5): a date such as `2024-01-15` followed by more numbers is not one.
fn card_grouping(candidate: &str) -> bool {
    let groups: Vec<&str> = candidate.split([' ', '-']).collect();
    groups.len() == 1 || groups.iter().all(|g| (3..=6).contains(&g.len()))
}

/// The Luhn checksum: from the right, every second digit doubled (less 9 when
/// over 9), and the sum a multiple of 10.
pub fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            match i % 2 {
                0 => d,
                _ if d * 2 > 9 => d * 2 - 9,
                _ => d * 2,
            }
        })
        .sum();
    !digits.is_empty() && sum.is_multiple_of(10)
}

/// IBANs: a country code, two check digits and an alphanumeric BBAN, 15 to 34
/// characters, printed in capitals, compact or in groups of four, passing the
/// ISO 7064 mod-97 check.
fn ibans(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let alnum = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    let mut found = Vec::new();
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let head = &bytes[at..at + 4];
        if !(starts_token(bytes, at)
            && head[..2].iter().all(u8::is_ascii_uppercase)
            && head[2..].iter().all(u8::is_ascii_digit))
        {
            at += 1;
            continue;
        }
        // The candidate's end, and the ends just before each space in it.
        let mut end = at + 4;
        let mut cuts = vec![end];
        let mut length = 4;
        // No IBAN is longer than 34 characters: stop there, so a long run of
        // capitals costs one bounded look.
        while end < bytes.len() && length <= 34 {
            if alnum(bytes[end]) {
                length += 1;
                end += 1;
            } else if bytes[end] == b' ' && bytes.get(end + 1).is_some_and(|&b| alnum(b)) {
                cuts.push(end);
                end += 1;
            } else {
                break;
            }
        }
        let iban = std::iter::once(end)
            .filter(|&e| ends_token(bytes, e))
            .chain(cuts.into_iter().rev())
            .find(|&e| valid_iban(&text[at..e]));
        match iban {
            Some(e) => {
                found.push(at..e);
                at = e;
            }
            None => at += 1,
        }
    }
    found
}

/// ISO 13616 structure and the ISO 7064 mod-97-10 check: the first four
/// characters moved to the end, letters read as 10 to 35, the number mod 97
/// is 1. Check digits 00, 01 and 99 never occur (99 ≡ 02 mod 97 would pass).
pub fn valid_iban(candidate: &str) -> bool {
    let compact: Vec<u8> = candidate.bytes().filter(|b| *b != b' ').collect();
    if !(15..=34).contains(&compact.len()) || matches!(&compact[2..4], b"00" | b"01" | b"99") {
        return false;
    }
    let mut remainder: u32 = 0;
    for &b in compact[4..].iter().chain(&compact[..4]) {
        remainder = match b {
            b'0'..=b'9' => (remainder * 10 + u32::from(b - b'0')) % 97,
            b'A'..=b'Z' => (remainder * 100 + u32::from(b - b'A') + 10) % 97,
            _ => return false,
        };
    }
    remainder == 1
}

/// US Social Security numbers, `ddd-dd-dddd`, without the numbers the SSA never
/// issues: area 000, 666 or 900–999, group 00, serial 0000.
fn ssns(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for at in 0..bytes.len().saturating_sub(10) {
        let end = at + 11;
        let shape = bytes[at..end].iter().enumerate().all(|(i, b)| {
            if i == 3 || i == 6 {
                *b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
        // Not a piece of a longer dashed or dotted number (a full stop after
        // it is fine).
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let clear_before = before.is_none_or(|b| !(b.is_ascii_alphanumeric() || b"-+./".contains(&b)));
        let clear_after = bytes.get(end).is_none_or(|b| {
            !(b.is_ascii_alphanumeric() || (b"-./".contains(b) && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)))
        });
        if shape && clear_before && clear_after {
            let (area, group, serial) = (&text[at..at + 3], &text[at + 4..at + 6], &text[at + 7..end]);
            if area != "000" && area != "666" && !area.starts_with('9') && group != "00" && serial != "0000" {
                found.push(at..end);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(kind: Kind, text: &str) -> Vec<&str> {
        kind.find(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn luhn_and_mod97_are_exact() {
        assert!(luhn(&digits(b"4111111111111111")));
        assert!(!luhn(&digits(b"4111111111111112")));
        assert!(luhn(&digits(b"79927398713")));
        assert!(valid_iban("DE89370400440532013000"));
        assert!(valid_iban("GB82 WEST 1234 5698 7654 32"));
        assert!(!valid_iban("GB82 WEST 1234 5698 7654 33"));
        assert!(!valid_iban("DE00370400440532013000"));
    }

    #[test]
    fn emails_keep_their_punctuation_out() {
        assert_eq!(
            found(Kind::Email, "mail alice.b+x@mail.example.co.uk."),
            ["alice.b+x@mail.example.co.uk"]
        );
        assert_eq!(
            found(Kind::Email, "<bob@example.org>, carol@ex-ample.io"),
            ["bob@example.org", "carol@ex-ample.io"]
        );
        assert!(found(Kind::Email, "user@localhost and @handle and a@b.c").is_empty());
    }

    #[test]
    fn cards_must_pass_luhn() {
        assert_eq!(
            found(Kind::Card, "card 4111 1111 1111 1111, exp 12/27"),
            ["4111 1111 1111 1111"]
        );
        assert_eq!(found(Kind::Card, "5500-0000-0000-0004"), ["5500-0000-0000-0004"]);
        assert_eq!(found(Kind::Card, "378282246310005"), ["378282246310005"]);
        assert!(found(Kind::Card, "1234 5678 9012 3456").is_empty());
        assert!(found(Kind::Card, "order 4111111111111111234567").is_empty());
        // Dates in a row, whatever their checksum.
        assert!(found(Kind::Card, "2024-01-15 2024-02-15 2024").is_empty());
        assert!(found(Kind::Card, "+4111111111111111").is_empty());
        // A valid number followed by more digits in a new group.
        assert_eq!(found(Kind::Card, "4111 1111 1111 1111 12"), ["4111 1111 1111 1111"]);
    }

    #[test]
    fn ibans_must_pass_mod97() {
        assert_eq!(
            found(Kind::Iban, "IBAN: DE89 3704 0044 0532 0130 00."),
            ["DE89 3704 0044 0532 0130 00"]
        );
        assert_eq!(
            found(Kind::Iban, "to GB82WEST12345698765432 today"),
            ["GB82WEST12345698765432"]
        );
        assert_eq!(
            found(Kind::Iban, "NL91 ABNA 0417 1643 00 OK"),
            ["NL91 ABNA 0417 1643 00"]
        );
        assert!(found(Kind::Iban, "DE89 3704 0044 0532 0130 01").is_empty());
        assert!(found(Kind::Iban, "AB12 CDEF GHIJ KLMN").is_empty());
    }

    #[test]
    fn ssns_skip_numbers_never_issued() {
        assert_eq!(found(Kind::NationalId, "SSN 123-45-6789."), ["123-45-6789"]);
        for never in [
            "000-12-3456",
            "666-12-3456",
            "912-34-5678",
            "123-00-4567",
            "123-45-0000",
        ] {
            assert!(found(Kind::NationalId, never).is_empty(), "{never}");
        }
        assert!(found(Kind::NationalId, "1-123-45-6789 or 123-45-67890").is_empty());
    }
}
