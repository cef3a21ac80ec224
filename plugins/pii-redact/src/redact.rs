//! Turning findings into placeholders and back. Placeholders are numbered per
//! kind in order of first appearance across all of a request's texts, and the
//! same value always gets the same placeholder, so the model can still tell
//! "the same address" from "another address". The memo maps each placeholder
//! to its original, for the answer's restore.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::detect::Kind;

/// Placeholder → original value, e.g. `[EMAIL_1]` → `alice@example.com`.
pub type Memo = BTreeMap<String, String>;

/// A request's texts with the findings replaced, and what each placeholder
/// stands for.
#[derive(Debug, PartialEq, Eq)]
pub struct Redaction {
    pub texts: Vec<String>,
    pub memo: Memo,
}

/// Findings of `kinds` in `text`, without overlaps (the earlier kind in
/// [`Kind::ALL`] wins), in text order.
pub fn findings(text: &str, kinds: &[Kind]) -> Vec<(Range<usize>, Kind)> {
    let mut all: Vec<(Range<usize>, Kind)> = Vec::new();
    for kind in Kind::ALL.into_iter().filter(|k| kinds.contains(k)) {
        for range in kind.find(text) {
            if all
                .iter()
                .all(|(taken, _)| range.end <= taken.start || taken.end <= range.start)
            {
                all.push((range, kind));
            }
        }
    }
    all.sort_by_key(|(range, _)| range.start);
    all
}

/// Redacts `texts`; `None` when none holds anything of `kinds`.
pub fn redact<'a>(texts: impl IntoIterator<Item = &'a str>, kinds: &[Kind]) -> Option<Redaction> {
    let mut assigned: BTreeMap<(Kind, &str), String> = BTreeMap::new();
    let mut counts: BTreeMap<Kind, usize> = BTreeMap::new();
    let mut memo = Memo::new();
    let mut out = Vec::new();
    for text in texts {
        let mut redacted = String::with_capacity(text.len());
        let mut copied = 0;
        for (range, kind) in findings(text, kinds) {
            let original = &text[range.clone()];
            let placeholder = assigned.entry((kind, original)).or_insert_with(|| {
                let n = counts.entry(kind).or_default();
                *n += 1;
                let placeholder = format!("[{}_{n}]", kind.label());
                memo.insert(placeholder.clone(), original.to_string());
                placeholder
            });
            redacted.push_str(&text[copied..range.start]);
            redacted.push_str(placeholder);
            copied = range.end;
        }
        redacted.push_str(&text[copied..]);
        out.push(redacted);
    }
    (!memo.is_empty()).then_some(Redaction { texts: out, memo })
}

/// The longest placeholder worth looking up: `[NATIONAL_ID_` and a number.
const MAX_PLACEHOLDER: usize = 32;

/// `text` with every placeholder of `memo` put back; `None` when it has none.
pub fn restore(text: &str, memo: &Memo) -> Option<String> {
    let mut restored = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(open) = text[search..].find('[').map(|i| search + i) {
        // Bytes, not a `str` slice: the window may end inside a character.
        let window = &text.as_bytes()[open..text.len().min(open + MAX_PLACEHOLDER)];
        let original = window
            .iter()
            .position(|b| *b == b']')
            .and_then(|close| memo.get(&text[open..=open + close]).map(|o| (open + close + 1, o)));
        match original {
            Some((end, original)) => {
                restored.push_str(&text[copied..open]);
                restored.push_str(original);
                copied = end;
                search = end;
            }
            None => search = open + 1,
        }
    }
    (copied > 0).then(|| {
        restored.push_str(&text[copied..]);
        restored
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_across_texts_and_reused() {
        let texts = [
            "Mail alice@example.com or bob@example.com, card 4111 1111 1111 1111.",
            "Again: alice@example.com, call +1 415 555 2671, SSN 123-45-6789, IBAN DE89370400440532013000",
            "nothing here",
        ];
        let redaction = redact(texts, &Kind::ALL).unwrap();
        assert_eq!(
            redaction.texts,
            [
                "Mail [EMAIL_1] or [EMAIL_2], card [CARD_1].",
                "Again: [EMAIL_1], call [PHONE_1], SSN [NATIONAL_ID_1], IBAN [IBAN_1]",
                "nothing here",
            ]
        );
        assert_eq!(redaction.memo.len(), 6);
        assert_eq!(redaction.memo["[EMAIL_2]"], "bob@example.com");
        assert_eq!(redaction.memo["[CARD_1]"], "4111 1111 1111 1111");
        assert_eq!(redaction.memo["[NATIONAL_ID_1]"], "123-45-6789");
    }

    #[test]
    fn only_the_chosen_kinds_and_nothing_found_is_none() {
        let texts = ["alice@example.com, 415-555-2671"];
        let redaction = redact(texts, &[Kind::Phone]).unwrap();
        assert_eq!(redaction.texts, ["alice@example.com, [PHONE_1]"]);
        assert_eq!(redact(["no personal data, 42 apples"], &Kind::ALL), None);
        assert_eq!(redact(texts, &[]), None);
    }

    #[test]
    fn an_email_wins_over_the_digits_inside_it() {
        let redaction = redact(["4155552671.415.555.2671@example.com"], &Kind::ALL).unwrap();
        assert_eq!(redaction.texts, ["[EMAIL_1]"]);
    }

    #[test]
    fn restore_puts_originals_back() {
        let redaction = redact(["alice@example.com and 123-45-6789"], &Kind::ALL).unwrap();
        let answer = "Dear [EMAIL_1], your id [NATIONAL_ID_1] ([EMAIL_2] is unknown, [x] stays).";
        assert_eq!(
            restore(answer, &redaction.memo).unwrap(),
            "Dear alice@example.com, your id 123-45-6789 ([EMAIL_2] is unknown, [x] stays)."
        );
        assert_eq!(restore("no placeholders [here]", &redaction.memo), None);
        assert_eq!(restore("[EMAIL_1", &redaction.memo), None);
    }

    #[test]
    fn long_adversarial_inputs_take_one_pass() {
        // Quadratic scanning would take minutes on these.
        for unit in ["1 ", "AB12 ", "a@", "a.", "12-", "(1) ", "+1 "] {
            let text = unit.repeat(200_000 / unit.len());
            let _ = findings(&text, &Kind::ALL);
        }
    }

    #[test]
    fn restore_handles_non_ascii_text() {
        let memo: Memo = [("[PHONE_1]".to_string(), "+44 20 7946 0958".to_string())].into();
        assert_eq!(
            restore("Ruf [é] an: [PHONE_1]…", &memo).unwrap(),
            "Ruf [é] an: +44 20 7946 0958…"
        );
    }
}
