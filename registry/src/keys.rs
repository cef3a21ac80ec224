//! Publishers' signing keys, per registry namespace (`registry_signing_keys`,
//! migration 0024): adding, listing and revoking them. Who may do so is the
//! host's to check (the workspace that owns the namespace); the built-in
//! namespace's keys are added by gateways from their binaries
//! ([`Index::add_builtin_key`]).

use schemars::JsonSchema;
use serde::Serialize;
use sqlx::Row;

use crate::index::{Index, IndexError, is_unique_violation, now_ms};
use crate::signing::PublicKey;

/// Most keys a namespace may have that are not revoked.
pub const MAX_ACTIVE_KEYS: i64 = 20;

/// One key of a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NamespaceKey {
    pub namespace: String,
    /// 16 hex digits of the key's SHA-256; signatures name their key by it.
    pub key_id: String,
    /// The ed25519 public key, 32 bytes base64url.
    pub public_key: String,
    /// A label for people ("ci", "alice's laptop").
    pub name: String,
    pub created_at_ms: i64,
    /// Set once revoked: signatures by it no longer count (docs/registry.md).
    pub revoked_at_ms: Option<i64>,
}

impl NamespaceKey {
    pub fn is_revoked(&self) -> bool {
        self.revoked_at_ms.is_some()
    }

    pub fn public_key(&self) -> Result<PublicKey, IndexError> {
        PublicKey::parse(&self.public_key).map_err(|e| IndexError::Corrupt(e.to_string()))
    }
}

/// The columns, in one place; a macro because sqlx takes only literal SQL.
macro_rules! columns {
    () => {
        "namespace, key_id, public_key, name, created_at, revoked_at"
    };
}

fn key(row: &sqlx::any::AnyRow) -> Result<NamespaceKey, IndexError> {
    Ok(NamespaceKey {
        namespace: row.try_get("namespace")?,
        key_id: row.try_get("key_id")?,
        public_key: row.try_get("public_key")?,
        name: row.try_get("name")?,
        created_at_ms: row.try_get("created_at")?,
        revoked_at_ms: row.try_get("revoked_at")?,
    })
}

impl Index {
    /// Registers `public_key` for `namespace`. A key already there, revoked
    /// or not, is a conflict: a revoked key never comes back.
    pub async fn add_signing_key(
        &self,
        namespace: &str,
        public_key: &PublicKey,
        name: &str,
        added_by: &str,
    ) -> Result<NamespaceKey, IndexError> {
        let key_id = public_key.key_id();
        let mut tx = self.begin_write().await?;
        let active: i64 = sqlx::query_scalar(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM registry_signing_keys WHERE namespace = $1 AND revoked_at IS NULL",
        )
        .bind(namespace)
        .fetch_one(&mut *tx)
        .await?;
        if active >= MAX_ACTIVE_KEYS {
            return Err(IndexError::Conflict(format!(
                "namespace '{namespace}' has {active} signing keys, the most it may have; revoke one first"
            )));
        }
        let now = now_ms();
        let inserted = sqlx::query(
            "INSERT INTO registry_signing_keys (namespace, key_id, public_key, name, added_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(namespace)
        .bind(&key_id)
        .bind(public_key.to_text())
        .bind(name)
        .bind(added_by)
        .bind(now)
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => {
                return Err(IndexError::Conflict(format!(
                    "key {key_id} is already registered for namespace '{namespace}' (a revoked key cannot be added again; generate a new one)"
                )));
            }
            Err(e) => return Err(e.into()),
        }
        tx.commit().await?;
        Ok(NamespaceKey {
            namespace: namespace.to_string(),
            key_id,
            public_key: public_key.to_text(),
            name: name.to_string(),
            created_at_ms: now,
            revoked_at_ms: None,
        })
    }

    /// A gateway's built-in key for the built-in namespace, added at start
    /// if no gateway added it before.
    pub async fn add_builtin_key(&self, namespace: &str, public_key: &PublicKey) -> Result<(), IndexError> {
        sqlx::query(
            "INSERT INTO registry_signing_keys (namespace, key_id, public_key, name, added_by, created_at) \
             VALUES ($1, $2, $3, 'built-in', '', $4) ON CONFLICT DO NOTHING",
        )
        .bind(namespace)
        .bind(public_key.key_id())
        .bind(public_key.to_text())
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The namespace's keys, revoked ones included, oldest first.
    pub async fn signing_keys(&self, namespace: &str) -> Result<Vec<NamespaceKey>, IndexError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM registry_signing_keys WHERE namespace = $1 ORDER BY created_at, key_id"
        ))
        .bind(namespace)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(key).collect()
    }

    pub async fn signing_key(&self, namespace: &str, key_id: &str) -> Result<Option<NamespaceKey>, IndexError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM registry_signing_keys WHERE namespace = $1 AND key_id = $2"
        ))
        .bind(namespace)
        .bind(key_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(key).transpose()
    }

    /// Revokes the key (again: no change); answers it as it is then.
    pub async fn revoke_signing_key(&self, namespace: &str, key_id: &str) -> Result<NamespaceKey, IndexError> {
        sqlx::query(
            "UPDATE registry_signing_keys SET revoked_at = $1 \
             WHERE namespace = $2 AND key_id = $3 AND revoked_at IS NULL",
        )
        .bind(now_ms())
        .bind(namespace)
        .bind(key_id)
        .execute(&self.pool)
        .await?;
        self.signing_key(namespace, key_id)
            .await?
            .ok_or_else(|| IndexError::NotFound(format!("key {key_id} of namespace '{namespace}' not found")))
    }
}
