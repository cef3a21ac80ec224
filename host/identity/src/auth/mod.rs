//! API keys and the principals they stand for. A key is `tg_live_` followed by 40
//! random base62 characters; only its SHA-256 is stored. Lookups hit an in-memory
//! cache first so the database stays off the hot path; [`KeyResolver`] says how
//! that cache stays correct when several gateways share one database.
//! `permissions` holds the role → permission table both planes check;
//! `caller` holds auth's handler state and the data plane's `Caller` extractor;
//! `refusals` logs the requests it refuses.
//! The console signs in through `signin` (routes under `/auth/`), with an API
//! key or an OIDC provider (`oidc`), into a cookie session (`sessions`) that
//! resolves to the same [`Principal`] a key would.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use rand::Rng;
use rand::distr::Alphanumeric;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod caller;
pub mod cluster_rates;
pub mod oidc;
pub mod permissions;
pub mod refusals;
pub mod sessions;
pub mod signin;
pub mod tool_policy;

pub use caller::{AuthState, Caller, SessionError};

use permissions::Role;
use tollgate_core::db::{Backend, Database, Db};
use tollgate_core::outage::{self, Outage};
pub use tool_policy::ToolPolicy;

pub const KEY_PREFIX: &str = "tg_live_";
const KEY_RANDOM_CHARS: usize = 40;
const KEY_MIN_RANDOM_CHARS: usize = 32;

pub type KeyHash = [u8; 32];

/// Where a key may act.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyScope {
    /// As its user, in every workspace the user belongs to (the `workspace_id`
    /// parameter of control-plane ops picks one).
    #[default]
    User,
    /// Only in the key's own workspace.
    Workspace,
}

impl KeyScope {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyScope::User => "user",
            KeyScope::Workspace => "workspace",
        }
    }

    pub fn parse(text: &str) -> Option<KeyScope> {
        [KeyScope::User, KeyScope::Workspace]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// Who is calling: resolved from a key. A key acts as its user, with the user's
/// role in the key's workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub key_id: String,
    pub workspace_id: String,
    /// `None` for keys made before users existed; they act as the workspace owner.
    pub user_id: Option<String>,
    pub role: Role,
    pub scope: KeyScope,
    /// The key's own request-rate limit (requests per minute), if it was given one.
    pub requests_per_minute: Option<u32>,
    /// The console session this principal acts through, if any: a session
    /// made with a key acts as that key, an OIDC session as its user (its id
    /// is then also `key_id`).
    pub console_session: Option<String>,
    /// The installs and tools it may reach over MCP (its key's list and its
    /// role's in the workspace; open when neither exists).
    pub tools: ToolPolicy,
}

impl Principal {
    /// Signed in through an identity provider (an OIDC console session), as
    /// a workspace that enforces SSO requires (docs/console.md).
    pub fn signed_in_with_oidc(&self) -> bool {
        self.console_session.as_deref() == Some(self.key_id.as_str())
    }
}

/// Who a principal is in the audit log: a key, or a console session of a
/// user signed in through OIDC (whose principal carries the session's id,
/// `sess_…`, in place of a key's).
pub fn audit_actor(principal: &Principal) -> tollgate_audit::Actor {
    let oidc = principal.signed_in_with_oidc();
    tollgate_audit::Actor {
        kind: match oidc {
            true => tollgate_audit::ActorKind::Oidc,
            false => tollgate_audit::ActorKind::Key,
        },
        user_id: principal.user_id.clone(),
        key_id: (!oidc).then(|| principal.key_id.clone()),
        session_id: principal.console_session.clone(),
    }
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

/// Something that changed what some keys may do. It is what one gateway tells
/// the others (as a Postgres notification payload), so it is plain data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeyChange {
    /// One key was revoked (its SHA-256, hex).
    Key { hash: String },
    /// A member's role changed or the member left: all their keys there.
    Member { workspace_id: String, user_id: String },
    /// The workspace was deleted: all its keys.
    Workspace { workspace_id: String },
}

impl KeyChange {
    pub fn key(hash: &KeyHash) -> Self {
        KeyChange::Key {
            hash: hex::encode(hash),
        }
    }

    fn affects(&self, hash: &KeyHash, principal: &Principal) -> bool {
        match self {
            KeyChange::Key { hash: changed } => *changed == hex::encode(hash),
            KeyChange::Member { workspace_id, user_id } => {
                principal.workspace_id == *workspace_id && principal.user_id.as_deref() == Some(user_id)
            }
            KeyChange::Workspace { workspace_id } => principal.workspace_id == *workspace_id,
        }
    }
}

/// A cached key is re-read from the database after this long unless a live
/// change feed vouches for it. This is the bound on how long a change made
/// elsewhere can go unseen when no notification arrives (SQLite shared by
/// several processes, or a Postgres listener that is down).
const UNWATCHED_TTL: Duration = Duration::from_secs(1);
/// Even with a live feed, re-read a key this often: changes made straight in
/// the database (not through the control plane) send no notification.
const WATCHED_MAX_AGE: Duration = Duration::from_secs(60);
/// The listener proves its connection alive when it has heard nothing for this long…
const PROBE_EVERY: Duration = Duration::from_millis(250);
/// …and gives the connection up if the probe takes longer than this.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// The feed counts as live for this long after its last sign of life; past it
/// (a stuck listener) cached keys fall back to [`UNWATCHED_TTL`].
const FEED_GRACE: Duration = Duration::from_millis(1_000);

type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// Resolves keys to principals, caching hits.
///
/// Anything that changes what a key may do (revocation, a role change, removal
/// from a workspace, deleting the workspace) commits through
/// [`KeyResolver::commit_change`], which drops the affected keys here and, on
/// Postgres, notifies every other gateway on the same schema (`NOTIFY`, sent
/// by the same transaction, so it goes out exactly when the change commits).
/// Each gateway listens (`LISTEN`) and drops the same keys within
/// milliseconds. A notification can be lost only with the listening
/// connection; the listener probes it when quiet, and while the feed is down
/// every cached key is marked stale and re-read on its next use, and again
/// after each [`UNWATCHED_TTL`], so a revoked key is refused within about a
/// second even then. SQLite has no feed: cached keys are always re-read after
/// [`UNWATCHED_TTL`], which also covers two processes sharing one file.
///
/// Through a database outage (docs/control-plane.md, "Immediate effect"): a
/// stale or expired key is still re-read first, and only when that read fails
/// for want of the database (`tollgate_core::outage`), not because the key is
/// unknown or revoked, is its last known principal served, until a read
/// succeeds. A key this gateway has not seen is refused with
/// [`ResolveError::Unavailable`] meanwhile. Keys a notification named are
/// dropped, not marked, so a change that arrived is never undone by an outage.
///
/// Clones share one cache (auth resolves through it, accounts evict from it).
#[derive(Clone)]
pub struct KeyResolver {
    shared: Arc<Shared>,
}

struct Shared {
    db: Db,
    cache: RwLock<Cache>,
    /// Whether the database answers key reads, and the outage's warnings.
    outage: Outage,
    /// Monotonic origin of the millisecond times below.
    origin: Instant,
    /// The feed is live until this time (ms since `origin`); 0: not live.
    feed_live_until: AtomicU64,
    /// The Postgres channel changes are announced on; `None` on SQLite.
    channel: Option<String>,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<KeyHash, Entry>,
    /// Bumped by every eviction. A lookup that started before an eviction does
    /// not cache its answer, which may predate the change.
    generation: u64,
}

struct Entry {
    principal: Arc<Principal>,
    /// When the database last confirmed it (ms since `origin`).
    checked_ms: u64,
    /// Changes may have been missed since it was read (the feed was down):
    /// re-read before it is trusted again, and kept only to serve while the
    /// database cannot answer.
    stale: bool,
}

/// Why a key could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The database cannot be reached and this gateway knows nothing of the
    /// key: it may well be valid, so this is no verdict on it.
    #[error("the API key could not be checked: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// The database answered something this gateway could not read.
    #[error("the API key could not be checked: {0}")]
    Failed(#[source] sqlx::Error),
}

impl KeyResolver {
    /// A resolver without a change feed (SQLite, and unit tests).
    pub fn new(db: Db) -> Self {
        Self {
            shared: Arc::new(Shared::new(db, None)),
        }
    }

    /// A resolver for `database`; on Postgres it also starts the change feed
    /// (`url` is the database URL) and waits briefly for it to connect, so a
    /// gateway that answers is normally already listening.
    pub async fn start(database: &Database, url: &str) -> anyhow::Result<Self> {
        if database.backend != Backend::Postgres {
            return Ok(Self::new(database.pool.clone()));
        }
        let schema: String = sqlx::query_scalar("SELECT CAST(current_schema() AS TEXT)")
            .fetch_one(&database.pool)
            .await?;
        let shared = Arc::new(Shared::new(database.pool.clone(), Some(change_channel(&schema))));
        let (connected_tx, connected_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(follow_changes(Arc::downgrade(&shared), url.to_string(), connected_tx));
        if tokio::time::timeout(Duration::from_secs(5), connected_rx)
            .await
            .is_err()
        {
            tracing::warn!(
                "key-change listener not connected yet; cached keys are re-checked every second until it is"
            );
        }
        Ok(Self { shared })
    }

    pub async fn resolve(&self, secret: &str) -> Result<Option<Arc<Principal>>, ResolveError> {
        if !is_well_formed(secret) {
            return Ok(None);
        }
        self.resolve_hash(&hash_key(secret)).await
    }

    /// [`Self::resolve`] for a key known by its hash (a console session made
    /// with that key).
    pub async fn resolve_hash(&self, hash: &KeyHash) -> Result<Option<Arc<Principal>>, ResolveError> {
        let hash = *hash;
        let shared = &self.shared;
        let now = shared.now_ms();
        let (generation, known) = {
            let cache = shared.cache.read().expect("key cache poisoned");
            match cache.entries.get(&hash) {
                Some(entry) if !entry.stale && shared.trusts(entry, now) => {
                    return Ok(Some(entry.principal.clone()));
                }
                entry => (cache.generation, entry.is_some()),
            }
        };
        let read = match known {
            true => shared.outage.revalidate(lookup(&shared.db, &hash)).await,
            false => shared.outage.ask(lookup(&shared.db, &hash)).await,
        };
        let principal = match read {
            Ok(principal) => principal.map(Arc::new),
            Err(error) if outage::unreachable(&error) => {
                // Read again: a notification may have dropped it meanwhile.
                let last_known = shared
                    .cache
                    .read()
                    .expect("key cache poisoned")
                    .entries
                    .get(&hash)
                    .map(|entry| entry.principal.clone());
                shared.outage.note(last_known.is_some(), &error);
                return match last_known {
                    Some(principal) => Ok(Some(principal)),
                    None => Err(ResolveError::Unavailable(error)),
                };
            }
            Err(error) => return Err(ResolveError::Failed(error)),
        };
        let mut cache = shared.cache.write().expect("key cache poisoned");
        if cache.generation == generation {
            match &principal {
                Some(principal) => {
                    cache.entries.insert(
                        hash,
                        Entry {
                            principal: principal.clone(),
                            checked_ms: now,
                            stale: false,
                        },
                    );
                }
                None => {
                    cache.entries.remove(&hash);
                }
            }
        } else if principal.is_none() {
            // Whatever changed meanwhile, the key is gone now.
            cache.entries.remove(&hash);
        }
        Ok(principal)
    }

    /// Commits `tx`, which made `change`, and makes every gateway drop the
    /// affected keys: this one at once, others (on Postgres) through the
    /// notification the transaction sends as it commits.
    pub async fn commit_change(&self, mut tx: Tx, change: KeyChange) -> anyhow::Result<()> {
        if let Some(channel) = &self.shared.channel {
            // pg_notify returns `void`, which the Any driver cannot decode.
            sqlx::query("SELECT CAST(pg_notify($1, $2) AS TEXT)")
                .bind(channel)
                .bind(serde_json::to_string(&change)?)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.shared.evict(&change);
        Ok(())
    }

    /// Whether a change feed is live (Postgres, listener connected).
    pub fn feed_live(&self) -> bool {
        self.shared.feed_live(self.shared.now_ms())
    }
}

impl Shared {
    fn new(db: Db, channel: Option<String>) -> Self {
        Self {
            db,
            cache: RwLock::new(Cache::default()),
            outage: Outage::new("API keys"),
            origin: Instant::now(),
            feed_live_until: AtomicU64::new(0),
            channel,
        }
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn feed_live(&self, now: u64) -> bool {
        now < self.feed_live_until.load(Ordering::Acquire)
    }

    fn trusts(&self, entry: &Entry, now: u64) -> bool {
        trusted(entry.checked_ms, now, self.feed_live(now))
    }

    fn evict(&self, change: &KeyChange) {
        let mut cache = self.cache.write().expect("key cache poisoned");
        cache.generation += 1;
        cache
            .entries
            .retain(|hash, entry| !change.affects(hash, &entry.principal));
    }

    /// Marks every key stale: the feed (re)connected or went down, so changes
    /// may have been missed. Each is re-read on its next use; the last known
    /// principal stays only for when the database cannot answer that read.
    fn mark_all_stale(&self) {
        let mut cache = self.cache.write().expect("key cache poisoned");
        cache.generation += 1;
        for entry in cache.entries.values_mut() {
            entry.stale = true;
        }
    }

    fn feed_heard(&self) {
        let until = self.now_ms() + FEED_GRACE.as_millis() as u64;
        self.feed_live_until.store(until, Ordering::Release);
    }

    fn feed_lost(&self) {
        self.feed_live_until.store(0, Ordering::Release);
        self.mark_all_stale();
    }

    fn apply(&self, payload: &str) {
        match serde_json::from_str::<KeyChange>(payload) {
            Ok(change) => self.evict(&change),
            // Unknown news (a newer gateway's message, say): be safe.
            Err(e) => {
                tracing::warn!(error = %e, "unreadable key-change notification; re-reading all cached keys");
                self.mark_all_stale();
            }
        }
    }
}

/// Whether an entry the database confirmed at `checked_ms` may still be used at `now`.
fn trusted(checked_ms: u64, now: u64, feed_live: bool) -> bool {
    let age = now.saturating_sub(checked_ms);
    let limit = if feed_live { WATCHED_MAX_AGE } else { UNWATCHED_TTL };
    age < limit.as_millis() as u64
}

/// The channel key changes are announced on for a schema. One channel per
/// schema: gateways on other schemas of the same database (other deployments,
/// parallel tests) are not woken by our changes. Hashed because channel names
/// are capped at 63 bytes. The listening connection's `application_name` is
/// the same string, so an operator can find it in `pg_stat_activity`.
pub fn change_channel(schema: &str) -> String {
    format!(
        "tollgate_keys_{}",
        &hex::encode(Sha256::digest(schema.as_bytes()))[..16]
    )
}

async fn lookup(db: &Db, hash: &KeyHash) -> sqlx::Result<Option<Principal>> {
    // A key whose user has left the workspace resolves to nothing. A
    // user-less key acts as the owner, whom no role list limits.
    type Row = (
        String,
        String,
        Option<String>,
        Option<String>,
        String,
        Option<i64>,
        Option<String>,
        Option<String>,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT k.id, k.workspace_id, k.user_id, m.role, k.scope, k.requests_per_minute, k.tools, p.tools \
         FROM api_keys k \
         LEFT JOIN memberships m ON m.workspace_id = k.workspace_id AND m.user_id = k.user_id \
         LEFT JOIN role_tool_policies p ON p.workspace_id = k.workspace_id AND p.role = m.role \
         WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
    )
    .bind(hash.to_vec())
    .fetch_optional(db)
    .await?;
    let Some((key_id, workspace_id, user_id, role, scope, requests_per_minute, key_tools, role_tools)) = row else {
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
    // An unknown scope (written by a newer gateway) confines the key.
    let scope = KeyScope::parse(&scope).unwrap_or(KeyScope::Workspace);
    Ok(Some(Principal {
        key_id,
        workspace_id,
        user_id,
        role,
        scope,
        requests_per_minute: requests_per_minute
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0),
        console_session: None,
        tools: ToolPolicy {
            key: tool_policy::from_column(key_tools),
            role: tool_policy::from_column(role_tools),
        },
    }))
}

/// The change feed: LISTEN on the schema's channel, drop what each
/// notification names, and treat any doubt about the connection as a lost
/// feed (mark the cache stale, fall back to the TTL) until it is back.
async fn follow_changes(shared: Weak<Shared>, url: String, connected: tokio::sync::oneshot::Sender<()>) {
    let mut connected = Some(connected);
    let mut backoff = Duration::from_millis(100);
    loop {
        let Some(channel) = shared.upgrade().and_then(|s| s.channel.clone()) else {
            return;
        };
        match listen(&url, &channel).await {
            Ok(mut listener) => {
                backoff = Duration::from_millis(100);
                {
                    let Some(shared) = shared.upgrade() else { return };
                    // Changes made while we were not listening are unknown.
                    shared.mark_all_stale();
                    shared.feed_heard();
                }
                if let Some(connected) = connected.take() {
                    let _ = connected.send(());
                }
                tracing::debug!(channel, "listening for key changes");
                let reason = receive(&shared, &mut listener).await;
                let Some(shared) = shared.upgrade() else { return };
                shared.feed_lost();
                tracing::warn!(
                    reason,
                    "key-change listener lost; cached keys are re-checked every second until it is back"
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, "key-change listener cannot connect; retrying");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn listen(url: &str, channel: &str) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
    let options: PgConnectOptions = url.parse()?;
    // A pool of one, used by the listener only to reconnect.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_with(options.application_name(channel))
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    // Reconnect only through our loop, which marks the cache stale first.
    listener.eager_reconnect(false);
    listener.listen(channel).await?;
    Ok(listener)
}

/// Receives until the connection is in doubt; returns why.
async fn receive(shared: &Weak<Shared>, listener: &mut sqlx::postgres::PgListener) -> String {
    loop {
        // `try_recv` is cancel-safe: a timeout loses no notification.
        match tokio::time::timeout(PROBE_EVERY, listener.try_recv()).await {
            Ok(Ok(Some(notification))) => {
                let Some(shared) = shared.upgrade() else {
                    return "gateway stopped".into();
                };
                shared.apply(notification.payload());
                shared.feed_heard();
            }
            Ok(Ok(None)) => return "connection closed".into(),
            Ok(Err(e)) => return e.to_string(),
            Err(_quiet) => {
                let probe = sqlx::query("SELECT 1").execute(&mut *listener);
                match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
                    Ok(Ok(_)) => match shared.upgrade() {
                        Some(shared) => shared.feed_heard(),
                        None => return "gateway stopped".into(),
                    },
                    Ok(Err(e)) => return e.to_string(),
                    Err(_) => return format!("no answer within {PROBE_TIMEOUT:?}"),
                }
            }
        }
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

    fn principal(workspace_id: &str, user_id: &str) -> Principal {
        Principal {
            key_id: "key_1".into(),
            workspace_id: workspace_id.into(),
            user_id: Some(user_id.into()),
            role: Role::Developer,
            scope: KeyScope::User,
            requests_per_minute: None,
            console_session: None,
            tools: ToolPolicy::default(),
        }
    }

    #[test]
    fn changes_name_exactly_the_keys_they_affect() {
        let hash = hash_key("tg_live_x");
        let other = hash_key("tg_live_y");
        let p = principal("ws_a", "user_a");
        assert!(KeyChange::key(&hash).affects(&hash, &p));
        assert!(!KeyChange::key(&hash).affects(&other, &p));
        let member = KeyChange::Member {
            workspace_id: "ws_a".into(),
            user_id: "user_a".into(),
        };
        assert!(member.affects(&other, &p));
        assert!(!member.affects(&other, &principal("ws_b", "user_a")));
        assert!(!member.affects(&other, &principal("ws_a", "user_b")));
        let workspace = KeyChange::Workspace {
            workspace_id: "ws_a".into(),
        };
        assert!(workspace.affects(&other, &principal("ws_a", "user_b")));
        assert!(!workspace.affects(&other, &principal("ws_b", "user_a")));
        // The payload round-trips, as another gateway reads it.
        let text = serde_json::to_string(&member).unwrap();
        assert_eq!(serde_json::from_str::<KeyChange>(&text).unwrap(), member);
        assert!(change_channel("public").len() <= 63);
        assert_ne!(change_channel("public"), change_channel("tenant_b"));
    }

    /// A resolver on a SQLite file holding just what `lookup` reads, with
    /// one key (and its hash) of a developer in `ws_a`.
    async fn resolver_with_a_key(dir: &tempfile::TempDir) -> (KeyResolver, Db, KeyHash) {
        sqlx::any::install_default_drivers();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("keys.db").display());
        let db = sqlx::AnyPool::connect(&url).await.unwrap();
        for statement in [
            "CREATE TABLE api_keys (id TEXT, workspace_id TEXT, user_id TEXT, key_hash BLOB, scope TEXT, \
             requests_per_minute INTEGER, revoked_at INTEGER, tools TEXT)",
            "CREATE TABLE memberships (workspace_id TEXT, user_id TEXT, role TEXT)",
            "INSERT INTO memberships VALUES ('ws_a', 'user_a', 'developer')",
            "CREATE TABLE role_tool_policies (workspace_id TEXT, role TEXT, tools TEXT, updated_at INTEGER)",
            "INSERT INTO role_tool_policies VALUES ('ws_a', 'developer', '[\"calc\"]', 0)",
            "INSERT INTO role_tool_policies VALUES ('ws_a', 'admin', '[\"other\"]', 0)",
        ] {
            sqlx::query(statement).execute(&db).await.unwrap();
        }
        let key = generate_key();
        sqlx::query(
            "INSERT INTO api_keys VALUES ('key_a', 'ws_a', 'user_a', $1, 'user', NULL, NULL, '[\"calc__add\"]')",
        )
        .bind(key.hash.to_vec())
        .execute(&db)
        .await
        .unwrap();
        (KeyResolver::new(db.clone()), db, key.hash)
    }

    /// Takes the key table away, as an outage would, and gives it back.
    async fn break_database(db: &Db, broken: bool) {
        let statement = match broken {
            true => "ALTER TABLE api_keys RENAME TO api_keys_away",
            false => "ALTER TABLE api_keys_away RENAME TO api_keys",
        };
        sqlx::query(statement).execute(db).await.unwrap();
    }

    #[tokio::test]
    async fn a_stale_key_is_served_from_its_last_known_state_only_while_the_database_cannot_answer() {
        let dir = tempfile::tempdir().unwrap();
        let (keys, db, hash) = resolver_with_a_key(&dir).await;
        let principal = keys.resolve_hash(&hash).await.unwrap().expect("a valid key");
        assert_eq!(principal.key_id, "key_a");
        // The key's own list and its role's (not another role's) come with it.
        let lists = (principal.tools.key.as_deref(), principal.tools.role.as_deref());
        assert_eq!(
            lists,
            (Some(&["calc__add".to_string()][..]), Some(&["calc".to_string()][..]))
        );

        // The feed drops (as the listener does when Postgres goes away), and
        // the database cannot answer: the key keeps working as it was.
        keys.shared.feed_lost();
        break_database(&db, true).await;
        for _ in 0..3 {
            let served = keys
                .resolve_hash(&hash)
                .await
                .unwrap()
                .expect("the last known principal");
            assert_eq!(served, principal);
        }
        // A key never seen gets no verdict: the database is what is missing.
        let unseen = hash_key(&generate_key().secret);
        assert!(matches!(
            keys.resolve_hash(&unseen).await,
            Err(ResolveError::Unavailable(_))
        ));

        // The database is back and the key was revoked meanwhile: refused
        // as soon as the outage's retry interval lets a read through.
        break_database(&db, false).await;
        sqlx::query("UPDATE api_keys SET revoked_at = 1")
            .execute(&db)
            .await
            .unwrap();
        tokio::time::sleep(tollgate_core::outage::RETRY_AFTER).await;
        assert_eq!(keys.resolve_hash(&hash).await.unwrap(), None);

        // Refused for good: an outage does not bring a revoked key back.
        break_database(&db, true).await;
        keys.shared.feed_lost();
        assert!(matches!(
            keys.resolve_hash(&hash).await,
            Err(ResolveError::Unavailable(_))
        ));
    }

    #[tokio::test]
    async fn a_key_a_notification_named_is_not_served_through_an_outage() {
        let dir = tempfile::tempdir().unwrap();
        let (keys, db, hash) = resolver_with_a_key(&dir).await;
        assert!(keys.resolve_hash(&hash).await.unwrap().is_some());
        keys.shared
            .apply(&serde_json::to_string(&KeyChange::key(&hash)).unwrap());
        break_database(&db, true).await;
        assert!(matches!(
            keys.resolve_hash(&hash).await,
            Err(ResolveError::Unavailable(_))
        ));
    }

    #[test]
    fn entries_expire_after_the_ttl_unless_a_live_feed_vouches() {
        assert!(trusted(10_000, 10_999, false));
        assert!(!trusted(10_000, 11_000, false), "no feed: re-read after a second");
        assert!(trusted(10_000, 19_000, true), "a live feed vouches for it");
        assert!(!trusted(10_000, 10_000 + WATCHED_MAX_AGE.as_millis() as u64, true));
        assert!(trusted(10_000, 9_000, false), "a clock read before the check");
    }
}
