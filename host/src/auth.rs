//! API keys and the principals they stand for. A key is `tg_live_` followed by 40
//! random base62 characters; only its SHA-256 is stored. Lookups hit an in-memory
//! cache first so the database stays off the hot path.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rand::Rng;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};

use crate::control::permissions::Role;
use crate::db::Db;

pub const KEY_PREFIX: &str = "tg_live_";
const KEY_RANDOM_CHARS: usize = 40;
const KEY_MIN_RANDOM_CHARS: usize = 32;

pub type KeyHash = [u8; 32];

/// Who is calling: resolved from a key. A key acts as its user, with the user's
/// role in the key's workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub key_id: String,
    pub workspace_id: String,
    /// `None` for keys made before users existed; they act as the workspace owner.
    pub user_id: Option<String>,
    pub role: Role,
}

/// A freshly minted key. `secret` must be shown once and then forgotten.
pub struct NewKey {
    pub secret: String,
    pub hash: KeyHash,
    /// A non-secret reminder of which key this is, e.g. `tg_live_AbCd…wxyz`.
    pub hint: String,
}

pub fn generate_key() -> NewKey {
    let random: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(KEY_RANDOM_CHARS)
        .map(char::from)
        .collect();
    let secret = format!("{KEY_PREFIX}{random}");
    let hint = format!("{KEY_PREFIX}{}…{}", &random[..4], &random[random.len() - 4..]);
    NewKey {
        hash: hash_key(&secret),
        secret,
        hint,
    }
}

pub fn hash_key(secret: &str) -> KeyHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// Cheap syntactic check, so garbage never reaches the cache or the database.
pub fn is_well_formed(secret: &str) -> bool {
    secret.strip_prefix(KEY_PREFIX).is_some_and(|rest| {
        rest.len() >= KEY_MIN_RANDOM_CHARS && rest.len() <= 128 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Resolves keys to principals, caching hits. Anything that changes what a key
/// may do (revocation, a role change, removal from a workspace) must call
/// [`KeyResolver::forget`] or [`KeyResolver::forget_where`], so the next request
/// sees the change.
pub struct KeyResolver {
    db: Db,
    cache: RwLock<HashMap<KeyHash, Arc<Principal>>>,
}

impl KeyResolver {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            cache: RwLock::new(HashMap::new()),
        }
    }

    pub async fn resolve(&self, secret: &str) -> anyhow::Result<Option<Arc<Principal>>> {
        if !is_well_formed(secret) {
            return Ok(None);
        }
        let hash = hash_key(secret);
        if let Some(hit) = self.cache.read().expect("key cache poisoned").get(&hash) {
            return Ok(Some(hit.clone()));
        }
        // A key whose user has left the workspace resolves to nothing.
        let row: Option<(String, String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT k.id, k.workspace_id, k.user_id, m.role FROM api_keys k \
             LEFT JOIN memberships m ON m.workspace_id = k.workspace_id AND m.user_id = k.user_id \
             WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
        )
        .bind(hash.to_vec())
        .fetch_optional(&self.db)
        .await?;
        let Some((key_id, workspace_id, user_id, role)) = row else {
            return Ok(None);
        };
        let role = match (&user_id, role) {
            (None, _) => Role::Owner,
            (Some(_), Some(role)) => match Role::parse(&role) {
                Some(role) => role,
                None => return Ok(None),
            },
            (Some(_), None) => return Ok(None),
        };
        let principal = Arc::new(Principal {
            key_id,
            workspace_id,
            user_id,
            role,
        });
        self.cache
            .write()
            .expect("key cache poisoned")
            .insert(hash, principal.clone());
        Ok(Some(principal))
    }

    pub fn forget(&self, hash: &KeyHash) {
        self.cache.write().expect("key cache poisoned").remove(hash);
    }

    /// Drops every cached principal matching `stale` (e.g. all keys of a user
    /// whose role just changed).
    pub fn forget_where(&self, stale: impl Fn(&Principal) -> bool) {
        self.cache
            .write()
            .expect("key cache poisoned")
            .retain(|_, principal| !stale(principal));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = generate_key();
        let b = generate_key();
        assert!(is_well_formed(&a.secret), "{}", a.secret);
        assert_ne!(a.secret, b.secret);
        assert_eq!(a.secret.len(), KEY_PREFIX.len() + KEY_RANDOM_CHARS);
        assert_eq!(a.hash, hash_key(&a.secret));
        assert!(!a.hint.contains(&a.secret[12..30]));
    }

    #[test]
    fn rejects_malformed_keys() {
        assert!(!is_well_formed("sk-123"));
        assert!(!is_well_formed("tg_live_short"));
        assert!(!is_well_formed(&format!("tg_live_{}", "a".repeat(31))));
        assert!(is_well_formed(&format!("tg_live_{}", "a".repeat(32))));
        assert!(!is_well_formed(&format!("tg_live_{}!", "a".repeat(32))));
        assert!(!is_well_formed(&format!("tg_test_{}", "a".repeat(40))));
    }
}
