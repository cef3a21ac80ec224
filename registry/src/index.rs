//! The registry index in SQL (SQLite or Postgres through sqlx's `Any` driver;
//! tables in the host's migration 0005). Queries use `$N` placeholders, which
//! both backends accept. Version order is semver order, computed here rather
//! than in SQL.

use serde::Serialize;
use sqlx::{AnyPool, Row};

use crate::signing::PackageSignature;
use crate::{Digest, Manifest, PackageKind, PackageName};

/// What [`record`] reads; a macro because sqlx takes only literal SQL.
macro_rules! version_columns {
    () => {
        "manifest, yanked, deprecated, published_at, manifest_digest, signature_key_id, signature"
    };
}

/// One published version as the index knows it.
#[derive(Clone, Debug, Serialize)]
pub struct VersionRecord {
    pub name: PackageName,
    pub version: semver::Version,
    pub digest: Digest,
    pub size: u64,
    pub yanked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    pub published_at_ms: i64,
    /// The manifest's digest as published (`signing::manifest_digest`); a
    /// stored manifest that no longer hashes to it was altered. `None` for
    /// versions published before it was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_digest: Option<Digest>,
    /// The publisher's signature, when the version was signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<PackageSignature>,
    #[serde(skip)]
    pub manifest: Manifest,
}

/// A package in search results: its newest version that is not yanked.
#[derive(Clone, Debug, Serialize)]
pub struct PackageSummary {
    pub name: PackageName,
    pub kind: PackageKind,
    pub description: String,
    pub latest: Option<semver::Version>,
    pub updated_at_ms: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    #[error("registry index: {0}")]
    Database(#[from] sqlx::Error),
    #[error("registry index holds an unreadable row: {0}")]
    Corrupt(String),
}

#[derive(Clone)]
pub struct Index {
    pub(crate) pool: AnyPool,
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    error.as_database_error().is_some_and(|e| e.is_unique_violation())
}

impl Index {
    pub fn new(pool: AnyPool) -> Self {
        Self { pool }
    }

    /// A transaction that reads and then writes. On SQLite it takes the write
    /// lock at `BEGIN` (waiting for it within the pool's busy timeout): a
    /// deferred one that reads first cannot upgrade once another connection
    /// has committed (`SQLITE_BUSY_SNAPSHOT`, "database is locked"), which a
    /// gateway's ledger writer does all the time.
    pub(crate) async fn begin_write(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Any>> {
        match self.pool.connect_options().database_url.scheme() {
            "sqlite" => self.pool.begin_with("BEGIN IMMEDIATE").await,
            _ => self.pool.begin().await,
        }
    }

    /// Records a new version, with its manifest digest and its signature
    /// (checked by the caller). Fails with `Conflict` if the version was ever
    /// published (yanked or not) or the package has another kind.
    pub async fn insert(
        &self,
        manifest: &Manifest,
        manifest_digest: &Digest,
        signature: Option<&PackageSignature>,
        publisher: &str,
    ) -> Result<VersionRecord, IndexError> {
        let name = manifest.name.to_string();
        let version = manifest.version.to_string();
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let kind: Option<String> = sqlx::query_scalar("SELECT kind FROM registry_packages WHERE name = $1")
            .bind(&name)
            .fetch_optional(&mut *tx)
            .await?;
        match kind {
            Some(kind) if kind != manifest.kind.as_str() => {
                return Err(IndexError::Conflict(format!(
                    "{name} is a {kind} package; a version cannot change it to {}",
                    manifest.kind
                )));
            }
            Some(_) => {
                sqlx::query("UPDATE registry_packages SET description = $1, updated_at = $2 WHERE name = $3")
                    .bind(&manifest.description)
                    .bind(now)
                    .bind(&name)
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                sqlx::query(
                    "INSERT INTO registry_packages (name, namespace, kind, description, created_at, updated_at, visibility) \
                     VALUES ($1, $2, $3, $4, $5, $5, $6)",
                )
                .bind(&name)
                .bind(manifest.name.namespace())
                .bind(manifest.kind.as_str())
                .bind(&manifest.description)
                .bind(now)
                .bind(crate::Visibility::default_for(manifest.kind).as_str())
                .execute(&mut *tx)
                .await?;
            }
        }
        let conflict =
            || IndexError::Conflict(format!("{name}@{version} is already published; versions are immutable"));
        let inserted = sqlx::query(
            "INSERT INTO registry_versions (name, version, digest, size, manifest, publisher, published_at, \
             manifest_digest, signature_key_id, signature) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&name)
        .bind(&version)
        .bind(manifest.content.digest.to_string())
        .bind(manifest.content.size as i64)
        .bind(serde_json::to_string(manifest).expect("a manifest serialises"))
        .bind(publisher)
        .bind(now)
        .bind(manifest_digest.to_string())
        .bind(signature.map(|s| s.key_id.clone()))
        .bind(signature.map(|s| s.signature.clone()))
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => return Err(conflict()),
            Err(e) => return Err(e.into()),
        }
        tx.commit()
            .await
            .map_err(|e| if is_unique_violation(&e) { conflict() } else { e.into() })?;
        Ok(VersionRecord {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            digest: manifest.content.digest.clone(),
            size: manifest.content.size,
            yanked: false,
            deprecated: None,
            published_at_ms: now,
            manifest_digest: Some(manifest_digest.clone()),
            signature: signature.cloned(),
            manifest: manifest.clone(),
        })
    }

    /// Every version of a package, newest first (semver order).
    pub async fn versions(&self, name: &PackageName) -> Result<Vec<VersionRecord>, IndexError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            version_columns!(),
            " FROM registry_versions WHERE name = $1"
        ))
        .bind(name.to_string())
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            return Err(IndexError::NotFound(format!("package {name} not found")));
        }
        let mut versions = rows.iter().map(record).collect::<Result<Vec<_>, _>>()?;
        versions.sort_by(|a, b| b.version.cmp(&a.version));
        Ok(versions)
    }

    pub async fn version(&self, name: &PackageName, version: &semver::Version) -> Result<VersionRecord, IndexError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            version_columns!(),
            " FROM registry_versions WHERE name = $1 AND version = $2"
        ))
        .bind(name.to_string())
        .bind(version.to_string())
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| IndexError::NotFound(format!("{name}@{version} not found")))?;
        record(&row)
    }

    pub async fn kind(&self, name: &PackageName) -> Result<Option<PackageKind>, IndexError> {
        let kind: Option<String> = sqlx::query_scalar("SELECT kind FROM registry_packages WHERE name = $1")
            .bind(name.to_string())
            .fetch_optional(&self.pool)
            .await?;
        kind.map(|k| k.parse().map_err(IndexError::Corrupt)).transpose()
    }

    pub async fn set_yanked(
        &self,
        name: &PackageName,
        version: &semver::Version,
        yanked: bool,
    ) -> Result<(), IndexError> {
        let done = sqlx::query("UPDATE registry_versions SET yanked = $1 WHERE name = $2 AND version = $3")
            .bind(i64::from(yanked))
            .bind(name.to_string())
            .bind(version.to_string())
            .execute(&self.pool)
            .await?;
        found(done.rows_affected(), name, version)
    }

    /// Records the manifest digest and signature of a version stored without
    /// them; a version that has a signature keeps it. Whether they belong to
    /// the version is the caller's to check. Returns whether it changed.
    pub(crate) async fn add_signature(
        &self,
        name: &PackageName,
        version: &semver::Version,
        manifest_digest: &Digest,
        signature: &PackageSignature,
    ) -> Result<bool, IndexError> {
        let done = sqlx::query(
            "UPDATE registry_versions SET manifest_digest = $1, signature_key_id = $2, signature = $3 \
             WHERE name = $4 AND version = $5 AND signature IS NULL",
        )
        .bind(manifest_digest.to_string())
        .bind(&signature.key_id)
        .bind(&signature.signature)
        .bind(name.to_string())
        .bind(version.to_string())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Sets (or, with `None`, clears) the deprecation message.
    pub async fn set_deprecated(
        &self,
        name: &PackageName,
        version: &semver::Version,
        message: Option<&str>,
    ) -> Result<(), IndexError> {
        let done = sqlx::query("UPDATE registry_versions SET deprecated = $1 WHERE name = $2 AND version = $3")
            .bind(message.map(str::to_string))
            .bind(name.to_string())
            .bind(version.to_string())
            .execute(&self.pool)
            .await?;
        found(done.rows_affected(), name, version)
    }

    /// Packages matching `kind` and `text` (in the name or description, any
    /// case) that `viewer` (a workspace id, `None`: anonymous) may read, most
    /// recently updated first.
    pub async fn search(
        &self,
        kind: Option<PackageKind>,
        text: Option<&str>,
        limit: u32,
        viewer: Option<&str>,
    ) -> Result<Vec<PackageSummary>, IndexError> {
        let pattern = format!("%{}%", text.unwrap_or("").to_lowercase().replace(['%', '_'], ""));
        let rows = sqlx::query(
            "SELECT name, kind, description, updated_at FROM registry_packages \
             WHERE ($1 = '' OR kind = $1) AND (LOWER(name) LIKE $2 OR LOWER(description) LIKE $2) \
             AND (visibility = 'public' OR namespace IN (SELECT name FROM registry_namespaces WHERE workspace_id = $4)) \
             ORDER BY updated_at DESC, name LIMIT $3",
        )
        .bind(kind.map_or("", PackageKind::as_str))
        .bind(pattern)
        .bind(i64::from(limit))
        .bind(viewer.unwrap_or(""))
        .fetch_all(&self.pool)
        .await?;
        let mut found = Vec::with_capacity(rows.len());
        for row in rows {
            let name: String = row.try_get("name")?;
            let name: PackageName = name
                .parse()
                .map_err(|e: crate::NameError| IndexError::Corrupt(e.to_string()))?;
            let kind: String = row.try_get("kind")?;
            let latest = self
                .versions(&name)
                .await?
                .into_iter()
                .find(|v| !v.yanked)
                .map(|v| v.version);
            found.push(PackageSummary {
                kind: kind.parse().map_err(IndexError::Corrupt)?,
                description: row.try_get("description")?,
                updated_at_ms: row.try_get("updated_at")?,
                name,
                latest,
            });
        }
        Ok(found)
    }

    /// The workspace that owns `namespace`, claiming it for `workspace_id`
    /// if nobody does yet.
    pub async fn claim_namespace(&self, namespace: &str, workspace_id: &str) -> Result<String, IndexError> {
        let inserted =
            sqlx::query("INSERT INTO registry_namespaces (name, workspace_id, created_at) VALUES ($1, $2, $3)")
                .bind(namespace)
                .bind(workspace_id)
                .bind(now_ms())
                .execute(&self.pool)
                .await;
        match inserted {
            Ok(_) => Ok(workspace_id.to_string()),
            Err(e) if is_unique_violation(&e) => self
                .namespace_owner(namespace)
                .await?
                .ok_or_else(|| IndexError::Corrupt(format!("namespace {namespace} vanished"))),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn namespace_owner(&self, namespace: &str) -> Result<Option<String>, IndexError> {
        Ok(
            sqlx::query_scalar("SELECT workspace_id FROM registry_namespaces WHERE name = $1")
                .bind(namespace)
                .fetch_optional(&self.pool)
                .await?,
        )
    }
}

fn found(rows: u64, name: &PackageName, version: &semver::Version) -> Result<(), IndexError> {
    match rows {
        0 => Err(IndexError::NotFound(format!("{name}@{version} not found"))),
        _ => Ok(()),
    }
}

fn record(row: &sqlx::any::AnyRow) -> Result<VersionRecord, IndexError> {
    let manifest: String = row.try_get("manifest")?;
    let manifest: Manifest = serde_json::from_str(&manifest).map_err(|e| {
        IndexError::Corrupt(format!(
            "a stored manifest does not parse ({e}); it was altered in storage"
        ))
    })?;
    let yanked: i64 = row.try_get("yanked")?;
    let manifest_digest: Option<String> = row.try_get("manifest_digest")?;
    let manifest_digest = manifest_digest
        .map(|d| d.parse::<Digest>())
        .transpose()
        .map_err(|e| IndexError::Corrupt(e.to_string()))?;
    let key_id: Option<String> = row.try_get("signature_key_id")?;
    let signature: Option<String> = row.try_get("signature")?;
    let signature = key_id
        .zip(signature)
        .map(|(key_id, signature)| PackageSignature { key_id, signature });
    Ok(VersionRecord {
        name: manifest.name.clone(),
        version: manifest.version.clone(),
        digest: manifest.content.digest.clone(),
        size: manifest.content.size,
        yanked: yanked != 0,
        deprecated: row.try_get("deprecated")?,
        published_at_ms: row.try_get("published_at")?,
        manifest_digest,
        signature,
        manifest,
    })
}
