//! Word arithmetic shared by replies, usage and stream chunking. "Words" are
//! whitespace-separated, so token counts are easy to predict in tests.

use std::fmt::Write;

pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// `word1 word2 … wordN`.
pub fn numbered_words(n: usize) -> String {
    let mut out = String::with_capacity(n * 7);
    for i in 1..=n {
        if i > 1 {
            out.push(' ');
        }
        let _ = write!(out, "word{i}");
    }
    out
}

/// Splits `text` into one piece per word, each later word keeping the
/// whitespace before it, so the pieces concatenate back to `text` exactly and
/// a streamed reply equals the non-streamed one. Trailing whitespace stays on
/// the last piece; text without words yields itself (or nothing if empty).
pub fn word_chunks(text: &str) -> Vec<&str> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if in_word && space {
            chunks.push(start..i);
            start = i;
        }
        in_word = !space;
    }
    if start < text.len() {
        match chunks.last_mut() {
            // Trailing whitespace: extend the last word rather than emit a
            // piece that holds no word.
            Some(last) if !in_word => last.end = text.len(),
            _ => chunks.push(start..text.len()),
        }
    }
    chunks.into_iter().map(|r| &text[r]).collect()
}

/// Splits `text` into at most `n` non-empty pieces on char boundaries: how
/// every route streams a tool call's arguments, so all stream them alike.
pub fn fragments(text: &str, n: usize) -> Vec<&str> {
    let size = text.len().div_ceil(n).max(1);
    let mut pieces = Vec::with_capacity(n);
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = size.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_concatenate_to_text_and_match_word_count() {
        for text in ["", "one", "a b c", "  lead", "trail  ", "x\n y\t z ", "   "] {
            let chunks = word_chunks(text);
            assert_eq!(chunks.concat(), text, "{text:?}");
            if word_count(text) > 0 {
                assert_eq!(chunks.len(), word_count(text), "{text:?}");
            }
        }
        assert_eq!(word_chunks("a b  c"), ["a", " b", "  c"]);
    }

    #[test]
    fn numbered() {
        assert_eq!(numbered_words(3), "word1 word2 word3");
        assert_eq!(numbered_words(0), "");
    }

    #[test]
    fn fragments_concatenate() {
        let args = r#"{"city":"mock","n":1}"#;
        let pieces = fragments(args, 3);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), args);
        assert_eq!(fragments("{}", 3), ["{", "}"]);
        assert_eq!(fragments("é€x", 3).concat(), "é€x");
    }
}
