//! A provider's prompt cache, simulated (`--prompt-cache`): a request whose
//! leading messages were all sent before, in the same order, reports their
//! tokens as read from the cache, as OpenAI's automatic prompt caching does.
//! One cache per mock process, so several mocks are several providers, each
//! with its own cache: what cache-aware routing is tested against.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::openai::request::Message;

/// Prefixes remembered at most; past it, the cache starts over (a real
/// provider evicts too).
const MAX_PREFIXES: usize = 1_000_000;

#[derive(Default)]
pub struct PromptCache {
    seen: Mutex<HashSet<u64>>,
}

impl PromptCache {
    /// The prompt tokens of the longest prefix of `messages` seen before (at
    /// least one message); remembers every prefix of this request.
    pub fn read_and_write(&self, messages: &[Message<'_>]) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        let mut tokens = 0;
        let mut prefixes = Vec::with_capacity(messages.len());
        for message in messages {
            for part in [message.role.as_bytes(), &[0], message.text().as_bytes(), &[1]] {
                hash = part.iter().fold(hash, |h, byte| {
                    (h ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
                });
            }
            tokens += crate::text::word_count(&message.text()) as u64 + 4;
            prefixes.push((hash, tokens));
        }
        let mut seen = self.seen.lock().expect("prompt cache lock poisoned");
        let cached = prefixes
            .iter()
            .rev()
            .find(|(hash, _)| seen.contains(hash))
            .map_or(0, |(_, tokens)| *tokens);
        if seen.len() + prefixes.len() > MAX_PREFIXES {
            seen.clear();
        }
        seen.extend(prefixes.iter().map(|(hash, _)| *hash));
        cached
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(json: &str) -> Vec<Message<'_>> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_repeated_prefix_is_read_from_the_cache() {
        let cache = PromptCache::default();
        let first = r#"[{"role":"system","content":"be brief"},{"role":"user","content":"hi there"}]"#;
        assert_eq!(cache.read_and_write(&messages(first)), 0, "nothing cached yet");
        let second = r#"[{"role":"system","content":"be brief"},{"role":"user","content":"hi there"},
            {"role":"assistant","content":"hello"},{"role":"user","content":"more"}]"#;
        assert_eq!(cache.read_and_write(&messages(second)), 6 + 6, "the first two messages");
        let other = r#"[{"role":"system","content":"be long"}]"#;
        assert_eq!(cache.read_and_write(&messages(other)), 0);
    }
}
