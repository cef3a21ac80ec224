//! The denylist's terms and where they occur in a text: words, matched
//! case-insensitively on word boundaries by hand (no regex needed, and no
//! escaping to get wrong), and regex patterns (`regex-automata` without its
//! `std` feature, whose `HashMap` seed would trap in the sandbox).

use std::ops::Range;

use regex_automata::meta::Regex;

pub enum Term {
    Word(String),
    Pattern(Regex),
}

/// An occurrence of a term: where, and what the deny reason calls it (the
/// configured word, or the text a pattern matched).
#[derive(Debug, PartialEq, Eq)]
pub struct Hit {
    pub range: Range<usize>,
    pub name: String,
}

/// The longest matched text a deny reason repeats, in characters.
const MAX_NAME_CHARS: usize = 64;

/// `words` (comma-separated) and `patterns` (one per line): the terms, and
/// a message for each pattern that does not compile (it is skipped).
pub fn parse(words: Option<&str>, patterns: Option<&str>) -> (Vec<Term>, Vec<String>) {
    let mut terms: Vec<Term> = words
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| Term::Word(w.to_string()))
        .collect();
    let mut errors = Vec::new();
    for source in patterns
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match Regex::new(source) {
            Ok(regex) => terms.push(Term::Pattern(regex)),
            Err(error) => errors.push(format!("pattern {source:?} skipped: {error}")),
        }
    }
    (terms, errors)
}

impl Term {
    /// Non-overlapping occurrences in `text`, in order. A pattern's empty
    /// matches are not occurrences.
    pub fn find(&self, text: &str) -> Vec<Hit> {
        match self {
            Term::Word(word) => find_word(text, word)
                .into_iter()
                .map(|range| Hit {
                    range,
                    name: word.clone(),
                })
                .collect(),
            Term::Pattern(regex) => regex
                .find_iter(text)
                .filter(|m| !m.is_empty())
                .map(|m| Hit {
                    range: m.range(),
                    name: text[m.range()].chars().take(MAX_NAME_CHARS).collect(),
                })
                .collect(),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `word` in `text`, ignoring case, where it is a whole word: a boundary is
/// required at an edge only when the word's own edge is a word character, so
/// `c++` or `.env` are found as written.
fn find_word(text: &str, word: &str) -> Vec<Range<usize>> {
    let (Some(first), Some(last)) = (word.chars().next(), word.chars().next_back()) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut from = 0;
    for (start, _) in text.char_indices() {
        if start < from {
            continue;
        }
        let before = text[..start].chars().next_back();
        if is_word_char(first) && before.is_some_and(is_word_char) {
            continue;
        }
        let Some(end) = match_folded(&text[start..], word).map(|len| start + len) else {
            continue;
        };
        if is_word_char(last) && text[end..].chars().next().is_some_and(is_word_char) {
            continue;
        }
        found.push(start..end);
        from = end;
    }
    found
}

/// The byte length of the prefix of `text` that equals `word` ignoring case
/// (character by character, by their lowercase forms).
fn match_folded(text: &str, word: &str) -> Option<usize> {
    let mut chars = text.char_indices();
    for expected in word.chars() {
        let (_, actual) = chars.next()?;
        if !actual.to_lowercase().eq(expected.to_lowercase()) {
            return None;
        }
    }
    Some(chars.next().map_or(text.len(), |(i, _)| i))
}

/// Every term's occurrences in `text`, in text order.
pub fn hits(text: &str, terms: &[Term]) -> Vec<Hit> {
    let mut hits: Vec<Hit> = terms.iter().flat_map(|t| t.find(text)).collect();
    hits.sort_by_key(|h| (h.range.start, std::cmp::Reverse(h.range.end)));
    hits
}

pub const REDACTED: &str = "[REDACTED]";

/// `text` with each hit (overlaps merged) replaced by [`REDACTED`].
pub fn redact(text: &str, hits: &[Hit]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for hit in hits {
        if hit.range.start >= copied {
            out.push_str(&text[copied..hit.range.start]);
            out.push_str(REDACTED);
            copied = hit.range.end;
        } else if hit.range.end > copied {
            copied = hit.range.end;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(word: &str, text: &str) -> Vec<String> {
        find_word(text, word).into_iter().map(|r| text[r].to_string()).collect()
    }

    #[test]
    fn words_on_boundaries_ignoring_case() {
        assert_eq!(
            found("foo", "Foo, FOO and foo_bar, food, afoo, foo."),
            ["Foo", "FOO", "foo"]
        );
        assert_eq!(found("project x", "about Project X's launch"), ["Project X"]);
        assert_eq!(found("c++", "I like C++ and c++17"), ["C++", "c++"]);
        assert_eq!(found("straße", "STRASSE nein, Straße ja"), ["Straße"]);
        assert_eq!(found("ünï", "ÜNÏcode? no: ÜNÏ!"), ["ÜNÏ"]);
    }

    #[test]
    fn patterns_and_bad_patterns() {
        let (terms, errors) = parse(
            Some(" secret , ,"),
            Some("ACME-[0-9]{4}\n\n(?i)\\bcode ?name\\b\n([unclosed\na*"),
        );
        assert_eq!(terms.len(), 4);
        assert!(matches!(&terms[0], Term::Word(w) if w == "secret"));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("pattern \"([unclosed\" skipped"));
        let text = "The Codename for ACME-1234 is secret; bbb";
        let names: Vec<String> = hits(text, &terms).into_iter().map(|h| h.name).collect();
        // `a*` finds the `a` inside "Codename", never its empty matches.
        assert_eq!(names, ["Codename", "a", "ACME-1234", "secret"]);
        assert_eq!(
            redact(text, &hits(text, &terms)),
            "The [REDACTED] for [REDACTED] is [REDACTED]; bbb"
        );
    }

    #[test]
    fn overlapping_hits_merge() {
        let (terms, _) = parse(Some("alpha beta,beta"), Some("beta gamma"));
        let text = "x alpha beta gamma y";
        assert_eq!(redact(text, &hits(text, &terms)), "x [REDACTED] y");
    }
}
