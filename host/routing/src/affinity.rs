//! Cache affinity: the turns of one conversation go to the deployment that
//! holds its prompt cache.
//!
//! A conversation's first deployment is chosen by weighted rendezvous
//! hashing of its key over the healthy candidates, so every gateway of a
//! cluster picks the same one with no shared state, and removing one
//! deployment moves only its own conversations. Once a turn is served, the
//! deployment that served it is remembered for the cache's lifetime: when a
//! deployment fails and a conversation moves, it stays where it moved (its
//! cache is there now) instead of bouncing back on recovery. That memory is
//! per gateway; a conversation whose turns land on other gateways falls back
//! to the rendezvous choice, which they share.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Conversations remembered at most; past it, expired ones are dropped, and
/// if none has expired, all (they fall back to rendezvous hashing, which
/// needs no memory).
const MAX_CONVERSATIONS: usize = 100_000;

/// What identifies a conversation, most explicit first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// The request's `session_id`.
    Session,
    /// The request's `user`.
    User,
    /// The leading system messages and the first user message.
    Prefix,
}

impl KeySource {
    pub fn name(self) -> &'static str {
        match self {
            KeySource::Session => "session_id",
            KeySource::User => "user",
            KeySource::Prefix => "prompt_prefix",
        }
    }
}

/// A conversation within one group: the same session in two groups is two
/// conversations, each with its own cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conversation {
    pub key: u64,
    pub source: KeySource,
}

impl Conversation {
    pub fn new(group: &str, source: KeySource, identity: &[u8]) -> Self {
        let key = fnv1a(fnv1a(FNV_OFFSET, group.as_bytes()) ^ source as u64, identity);
        Conversation { key, source }
    }

    /// The rendezvous score of `route_id` for this conversation: the highest
    /// wins. Weighted so a deployment of weight 2 wins twice as many
    /// conversations as one of weight 1.
    pub fn score(&self, route_id: &str, weight: u32) -> f64 {
        let hash = splitmix(fnv1a(self.key, route_id.as_bytes()));
        // A uniform draw in (0, 1) from the hash's top 53 bits.
        let uniform = ((hash >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        f64::from(weight) / -uniform.ln()
    }
}

pub struct Affinity {
    ttl: Duration,
    served: Mutex<HashMap<u64, (String, Instant)>>,
}

impl Affinity {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            served: Mutex::new(HashMap::new()),
        }
    }

    /// The deployment that served the conversation's last turn, while its
    /// cache may still live.
    pub fn last_served(&self, conversation: &Conversation) -> Option<String> {
        let served = self.served.lock().expect("affinity lock poisoned");
        served
            .get(&conversation.key)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(route, _)| route.clone())
    }

    pub fn record(&self, conversation: &Conversation, route_id: &str) {
        let mut served = self.served.lock().expect("affinity lock poisoned");
        if served.len() >= MAX_CONVERSATIONS && !served.contains_key(&conversation.key) {
            let ttl = self.ttl;
            served.retain(|_, (_, at)| at.elapsed() < ttl);
            if served.len() >= MAX_CONVERSATIONS {
                served.clear();
            }
        }
        match served.get_mut(&conversation.key) {
            Some((route, at)) => {
                if route != route_id {
                    route_id.clone_into(route);
                }
                *at = Instant::now();
            }
            None => {
                served.insert(conversation.key, (route_id.to_string(), Instant::now()));
            }
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a: stable across builds and machines, unlike std's hasher, so every
/// gateway of a cluster hashes a conversation alike.
fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Spreads FNV's output over all 64 bits before it becomes a draw.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn winner(conversation: &Conversation, routes: &[(&'static str, u32)]) -> &'static str {
        routes
            .iter()
            .max_by(|a, b| conversation.score(a.0, a.1).total_cmp(&conversation.score(b.0, b.1)))
            .unwrap()
            .0
    }

    #[test]
    fn rendezvous_spreads_by_weight_and_moves_only_the_lost_deployments_conversations() {
        let routes = [("a/m", 1), ("b/m", 1), ("c/m", 2)];
        let mut wins = HashMap::new();
        let mut moved = 0;
        for n in 0..4000u32 {
            let conversation = Conversation::new("g", KeySource::Session, &n.to_le_bytes());
            let first = winner(&conversation, &routes);
            *wins.entry(first).or_insert(0) += 1;
            let without_b = winner(&conversation, &[("a/m", 1), ("c/m", 2)]);
            if first != "b/m" {
                assert_eq!(first, without_b, "only b's conversations move");
            } else {
                moved += 1;
            }
        }
        assert!((800..1200).contains(&wins["a/m"]), "{wins:?}");
        assert!((1700..2300).contains(&wins["c/m"]), "{wins:?}");
        assert_eq!(moved, wins["b/m"]);
        let one = Conversation::new("g", KeySource::User, b"u1");
        assert_ne!(one.key, Conversation::new("h", KeySource::User, b"u1").key, "per group");
        assert_ne!(one.key, Conversation::new("g", KeySource::Session, b"u1").key);
    }

    #[test]
    fn remembers_where_a_conversation_was_served_for_the_ttl() {
        let affinity = Affinity::new(Duration::from_millis(30));
        let conversation = Conversation::new("g", KeySource::Prefix, b"system+first");
        assert_eq!(affinity.last_served(&conversation), None);
        affinity.record(&conversation, "a/m");
        affinity.record(&conversation, "b/m");
        assert_eq!(affinity.last_served(&conversation).as_deref(), Some("b/m"));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(affinity.last_served(&conversation), None, "the cache is gone");
    }
}
