//! The registry: publish (validate, check the component's world and any
//! signature, store the verified blob, then index it), read, resolve, yank
//! and deprecate. The blob is written before the index row, so an indexed
//! version always has content. Reading content for use is `vetting.rs`.

use bytes::Bytes;
use serde::Serialize;

use crate::blobs::{BlobError, BlobStore};
use crate::component::check_world;
use crate::index::{Index, IndexError};
use crate::policy::Refusal;
use crate::signing::{self, PackageSignature};
use crate::{Digest, Manifest, PackageKind, PackageName, PackageSummary, VersionRecord};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    /// The version exists but is yanked, so it cannot be newly resolved.
    #[error("{0}")]
    Yanked(String),
    /// Content does not match its digest (on upload, or altered at rest).
    #[error("{0}")]
    Integrity(String),
    /// The component does not implement its declared kind's world.
    #[error("{0}")]
    WrongWorld(String),
    /// A signature that does not verify: sent with a publish that it does
    /// not match, or stored with a version whose manifest or signature was
    /// altered since.
    #[error("{0}")]
    SignatureInvalid(String),
    /// The workspace's package policy requires a verified signature, and the
    /// version has none (the refusal says why).
    #[error("{message}")]
    SignatureRequired { refusal: Refusal, message: String },
    #[error("{0}")]
    Storage(String),
}

impl From<IndexError> for RegistryError {
    fn from(error: IndexError) -> Self {
        match error {
            IndexError::Conflict(m) => RegistryError::Conflict(m),
            IndexError::NotFound(m) => RegistryError::NotFound(m),
            // A row that no longer reads was altered in storage.
            e @ IndexError::Corrupt(_) => RegistryError::Integrity(e.to_string()),
            e @ IndexError::Database(_) => RegistryError::Storage(e.to_string()),
        }
    }
}

impl From<BlobError> for RegistryError {
    fn from(error: BlobError) -> Self {
        match error {
            BlobError::NotFound(d) => RegistryError::NotFound(format!("blob {d} not found")),
            e @ BlobError::DigestMismatch { .. } => RegistryError::Integrity(e.to_string()),
            e @ BlobError::Storage(_) => RegistryError::Storage(e.to_string()),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Published {
    pub name: PackageName,
    pub version: semver::Version,
    pub digest: Digest,
    /// What a signature covers of the manifest (docs/registry.md, "What is signed").
    pub manifest_digest: Digest,
    /// The key that signed it, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

#[derive(Clone)]
pub struct Registry {
    pub index: Index,
    pub blobs: BlobStore,
}

impl Registry {
    pub fn new(index: Index, blobs: BlobStore) -> Self {
        Self { index, blobs }
    }

    /// Publishes one unsigned version (see [`Registry::publish_signed`]).
    pub async fn publish(
        &self,
        manifest: &Manifest,
        content: Bytes,
        publisher: &str,
    ) -> Result<Published, RegistryError> {
        self.publish_signed(manifest, content, None, publisher).await
    }

    /// Publishes one version. The manifest must be valid, the content must match
    /// its digest and size, a component must implement its kind's world, and
    /// a signature must be over this manifest by a registered, unrevoked key
    /// of the package's namespace.
    pub async fn publish_signed(
        &self,
        manifest: &Manifest,
        content: Bytes,
        signature: Option<&PackageSignature>,
        publisher: &str,
    ) -> Result<Published, RegistryError> {
        manifest.validate().map_err(|e| RegistryError::Invalid(e.to_string()))?;
        let actual = Digest::of(&content);
        if actual != manifest.content.digest {
            return Err(RegistryError::Integrity(format!(
                "content does not match the manifest: content.digest is {}, but the uploaded content hashes to {actual}",
                manifest.content.digest
            )));
        }
        if content.len() as u64 != manifest.content.size {
            return Err(RegistryError::Invalid(format!(
                "content.size is {}, but the uploaded content is {} bytes",
                manifest.content.size,
                content.len()
            )));
        }
        check_world(manifest.kind, &content).map_err(|e| RegistryError::WrongWorld(e.to_string()))?;
        crate::document::check_document(manifest.kind, &content).map_err(|e| RegistryError::Invalid(e.to_string()))?;
        crate::document::check_prompt_arguments(manifest, &content)
            .map_err(|e| RegistryError::Invalid(e.to_string()))?;
        if let Some(signature) = signature {
            self.check_new_signature(manifest, signature).await?;
        }
        let manifest_digest = signing::manifest_digest(manifest).map_err(|e| RegistryError::Invalid(e.to_string()))?;
        // Refuse a reused version before writing anything; the index insert
        // below still decides races.
        if self.index.version(&manifest.name, &manifest.version).await.is_ok() {
            return Err(RegistryError::Conflict(format!(
                "{}@{} is already published; versions are immutable (publish a new version)",
                manifest.name, manifest.version
            )));
        }
        self.blobs.put(&manifest.content.digest, content).await?;
        self.index
            .insert(manifest, &manifest_digest, signature, publisher)
            .await?;
        Ok(Published {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            digest: manifest.content.digest.clone(),
            manifest_digest,
            signed_by: signature.map(|s| s.key_id.clone()),
        })
    }

    /// The newest version matching `requirement` that is not yanked. An exact
    /// version that exists but is yanked answers `Yanked`, so the caller learns why.
    pub async fn resolve(
        &self,
        name: &PackageName,
        requirement: &semver::VersionReq,
    ) -> Result<VersionRecord, RegistryError> {
        let versions = self.index.versions(name).await?;
        if let Some(found) = versions.iter().find(|v| !v.yanked && requirement.matches(&v.version)) {
            return Ok(found.clone());
        }
        if let Some(yanked) = versions.iter().find(|v| requirement.matches(&v.version)) {
            return Err(RegistryError::Yanked(format!(
                "{name}@{} is yanked and cannot be newly installed; existing installs keep working",
                yanked.version
            )));
        }
        Err(RegistryError::NotFound(format!(
            "no version of {name} matches '{requirement}'"
        )))
    }

    /// A version for a new install: it must exist and not be yanked.
    pub async fn resolve_exact(
        &self,
        name: &PackageName,
        version: &semver::Version,
    ) -> Result<VersionRecord, RegistryError> {
        let record = self.index.version(name, version).await?;
        if record.yanked {
            return Err(RegistryError::Yanked(format!(
                "{name}@{version} is yanked and cannot be newly installed; existing installs keep working"
            )));
        }
        Ok(record)
    }

    /// A version's content with every check of [`Registry::verified`] passed.
    pub async fn content(&self, record: &VersionRecord) -> Result<Bytes, RegistryError> {
        Ok(self.verified(record).await?.content)
    }

    /// The content, verified against its digest and checked again against
    /// its kind's world; the manifest and signature are the caller's to check.
    pub(crate) async fn content_unvetted(&self, record: &VersionRecord) -> Result<Bytes, RegistryError> {
        let content = self.blobs.get(&record.digest).await.map_err(|e| match e {
            BlobError::DigestMismatch { .. } => RegistryError::Integrity(format!(
                "the stored content of {}@{} does not match its digest {}: refusing to use it",
                record.name, record.version, record.digest
            )),
            other => other.into(),
        })?;
        check_world(record.manifest.kind, &content).map_err(|e| RegistryError::WrongWorld(e.to_string()))?;
        Ok(content)
    }

    pub async fn yank(&self, name: &PackageName, version: &semver::Version, yanked: bool) -> Result<(), RegistryError> {
        Ok(self.index.set_yanked(name, version, yanked).await?)
    }

    pub async fn deprecate(
        &self,
        name: &PackageName,
        version: &semver::Version,
        message: Option<&str>,
    ) -> Result<(), RegistryError> {
        if let Some(message) = message
            && (message.is_empty() || message.len() > 1024)
        {
            return Err(RegistryError::Invalid(
                "a deprecation message must be 1 to 1024 bytes".into(),
            ));
        }
        Ok(self.index.set_deprecated(name, version, message).await?)
    }

    pub async fn search(
        &self,
        kind: Option<PackageKind>,
        text: Option<&str>,
        limit: u32,
        viewer: Option<&str>,
    ) -> Result<Vec<PackageSummary>, RegistryError> {
        Ok(self.index.search(kind, text, limit.clamp(1, 200), viewer).await?)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::StorageConfig;
    use crate::component::tests::component_exporting;

    pub(crate) async fn registry(dir: &std::path::Path) -> Registry {
        sqlx::any::install_default_drivers();
        let url = format!("sqlite://{}?mode=rwc", dir.join("index.db").display());
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        sqlx::migrate!("../host/core/migrations/sqlite")
            .run(&pool)
            .await
            .unwrap();
        let blobs = BlobStore::open(&StorageConfig::Local, &dir.join("blobs")).unwrap();
        Registry::new(Index::new(pool), blobs)
    }

    pub(crate) fn manifest(kind: PackageKind, version: &str, content: &[u8]) -> Manifest {
        Manifest {
            schema_version: 1,
            kind,
            name: "acme/echo".parse().unwrap(),
            version: version.parse().unwrap(),
            description: "Echoes".into(),
            license: "MIT".into(),
            content: crate::Content {
                digest: Digest::of(content),
                size: content.len() as u64,
                media_type: crate::manifest::WASM_MEDIA_TYPE.into(),
            },
            dependencies: Default::default(),
            metadata: crate::Metadata {
                world: kind.wit_world().map(str::to_string),
                ..Default::default()
            },
        }
    }

    /// Two gateways on one database, each with its own blob directory: what
    /// one publishes, the other reads from the database copy, verifies and
    /// keeps; a copy altered in the database is refused.
    #[tokio::test]
    async fn a_gateway_reads_a_blob_it_lacks_from_the_database_copy() {
        let dir = tempfile::tempdir().unwrap();
        let with_copies = |registry: Registry| {
            let pool = registry.index.pool.clone();
            Registry::new(registry.index, registry.blobs.with_database_copies(pool))
        };
        let first = with_copies(registry(dir.path()).await);
        let second_blobs = dir.path().join("second");
        let second = Registry::new(
            first.index.clone(),
            BlobStore::open(&StorageConfig::Local, &second_blobs)
                .unwrap()
                .with_database_copies(first.index.pool.clone()),
        );
        let adapter = Bytes::from(component_exporting("tollgate:provider/adapter@0.1.0"));
        let adapter_v2 = Bytes::from(component_exporting("tollgate:provider/adapter@0.2.0"));
        let v1 = manifest(PackageKind::ProviderAdapter, "1.0.0", &adapter);
        first.publish(&v1, adapter.clone(), "ws_1").await.unwrap();
        let record = second.index.version(&v1.name, &v1.version).await.unwrap();
        assert_eq!(second.content(&record).await.unwrap(), adapter);
        let cached = second_blobs.join("blobs/sha256").join(v1.content.digest.hex());
        assert_eq!(std::fs::read(&cached).unwrap(), adapter, "kept in the second store");

        // Without the copy, a store that lacks the blob says so.
        let plain = BlobStore::open(&StorageConfig::Local, &dir.path().join("third")).unwrap();
        assert!(matches!(
            plain.get(&v1.content.digest).await,
            Err(BlobError::NotFound(_))
        ));

        // A gateway that stored blobs before it kept copies shares them later.
        let older = Registry::new(
            first.index.clone(),
            BlobStore::open(&StorageConfig::Local, &dir.path().join("older")).unwrap(),
        );
        let v2 = manifest(PackageKind::ProviderAdapter, "2.0.0", &adapter_v2);
        older.publish(&v2, adapter_v2.clone(), "ws_1").await.unwrap();
        let record = second.index.version(&v2.name, &v2.version).await.unwrap();
        assert!(second.content(&record).await.is_err(), "no copy yet");
        let sharing = BlobStore::open(&StorageConfig::Local, &dir.path().join("older"))
            .unwrap()
            .with_database_copies(first.index.pool.clone());
        assert_eq!(sharing.share_missing_copies().await.unwrap(), 1);
        assert_eq!(sharing.share_missing_copies().await.unwrap(), 0, "once");
        assert_eq!(second.content(&record).await.unwrap(), adapter_v2);

        sqlx::query("UPDATE registry_blob_copies SET content = $1")
            .bind(b"tampered".to_vec())
            .execute(&first.index.pool)
            .await
            .unwrap();
        let fourth = BlobStore::open(&StorageConfig::Local, &dir.path().join("fourth"))
            .unwrap()
            .with_database_copies(first.index.pool.clone());
        assert!(matches!(
            fourth.get(&v1.content.digest).await,
            Err(BlobError::DigestMismatch { .. })
        ));
    }

    /// A publish reads, then writes: its transaction must hold SQLite's
    /// write lock from the start, or a commit by another connection in
    /// between (a gateway's ledger writer) makes it fail "database is locked".
    #[tokio::test]
    async fn a_write_transaction_holds_sqlites_write_lock_from_its_start() {
        use sqlx::{Connection as _, Executor as _};
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let tx = registry.index.begin_write().await.unwrap();
        let url = format!("sqlite://{}", dir.path().join("index.db").display());
        let mut other = sqlx::AnyConnection::connect(&url).await.unwrap();
        other.execute("PRAGMA busy_timeout = 0").await.unwrap();
        let refused = other.execute("BEGIN IMMEDIATE").await;
        assert!(
            refused.is_err(),
            "another writer started while the transaction was open"
        );
        // Rolled back and awaited: a dropped transaction rolls back only when
        // its pooled connection is next used, so the lock could still be held.
        tx.rollback().await.unwrap();
        other.execute("BEGIN IMMEDIATE").await.unwrap();
    }

    #[tokio::test]
    async fn a_private_package_and_its_blob_are_readable_only_by_its_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let adapter = Bytes::from(component_exporting("tollgate:provider/adapter@0.1.0"));
        let v1 = manifest(PackageKind::ProviderAdapter, "1.0.0", &adapter);
        registry.index.claim_namespace("acme", "ws_owner").await.unwrap();
        registry.publish(&v1, adapter.clone(), "ws_owner:key").await.unwrap();
        let digest = &v1.content.digest;
        // Not an actor: public by default.
        assert_eq!(
            registry.index.read_access(&v1.name, None).await.unwrap(),
            Some(crate::Visibility::Public)
        );
        assert!(registry.index.readable_by(&v1.name, None).await.unwrap());
        assert!(registry.index.blob_readable_by(digest, Some("ws_other")).await.unwrap());

        registry
            .index
            .set_visibility(&v1.name, crate::Visibility::Private)
            .await
            .unwrap();
        for viewer in [None, Some("ws_other"), Some("")] {
            assert!(
                !registry.index.readable_by(&v1.name, viewer).await.unwrap(),
                "{viewer:?}"
            );
            assert!(
                !registry.index.blob_readable_by(digest, viewer).await.unwrap(),
                "{viewer:?}"
            );
            assert!(
                registry.search(None, None, 10, viewer).await.unwrap().is_empty(),
                "{viewer:?}"
            );
        }
        assert!(registry.index.readable_by(&v1.name, Some("ws_owner")).await.unwrap());
        assert!(registry.index.blob_readable_by(digest, Some("ws_owner")).await.unwrap());
        assert_eq!(
            registry.search(None, None, 10, Some("ws_owner")).await.unwrap().len(),
            1
        );
        // A blob nobody published is nobody's to read.
        assert!(
            !registry
                .index
                .blob_readable_by(&Digest::of(b"unpublished"), Some("ws_owner"))
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn versions_are_immutable_and_yank_hides_them() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let adapter = Bytes::from(component_exporting("tollgate:provider/adapter@0.1.0"));
        let v1 = manifest(PackageKind::ProviderAdapter, "1.0.0", &adapter);
        registry.publish(&v1, adapter.clone(), "ws_1").await.unwrap();
        assert!(matches!(
            registry.publish(&v1, adapter.clone(), "ws_1").await,
            Err(RegistryError::Conflict(_))
        ));

        let v2 = manifest(PackageKind::ProviderAdapter, "2.0.0", &adapter);
        registry.publish(&v2, adapter.clone(), "ws_1").await.unwrap();
        let any = semver::VersionReq::STAR;
        assert_eq!(registry.resolve(&v1.name, &any).await.unwrap().version, v2.version);

        registry.yank(&v2.name, &v2.version, true).await.unwrap();
        assert_eq!(registry.resolve(&v1.name, &any).await.unwrap().version, v1.version);
        assert!(matches!(
            registry.resolve_exact(&v2.name, &v2.version).await,
            Err(RegistryError::Yanked(_))
        ));
        // Still a conflict after the yank: the version is never reused.
        assert!(matches!(
            registry.publish(&v2, adapter.clone(), "ws_1").await,
            Err(RegistryError::Conflict(_))
        ));
        registry.yank(&v2.name, &v2.version, false).await.unwrap();
        registry.resolve_exact(&v2.name, &v2.version).await.unwrap();

        registry
            .deprecate(&v1.name, &v1.version, Some("use 2.x"))
            .await
            .unwrap();
        let versions = registry.index.versions(&v1.name).await.unwrap();
        assert_eq!(versions[1].deprecated.as_deref(), Some("use 2.x"));

        let found = registry
            .search(Some(PackageKind::ProviderAdapter), Some("ECHO"), 10, None)
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].latest, Some(v2.version.clone()));
        assert!(
            registry
                .search(Some(PackageKind::Skill), None, 10, None)
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn content_must_match_and_implement_the_kind() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let tool = Bytes::from(component_exporting("tollgate:tool/tools@0.1.0"));

        let mut tampered = manifest(PackageKind::ProviderAdapter, "1.0.0", b"other bytes");
        tampered.content.size = tool.len() as u64;
        assert!(matches!(
            registry.publish(&tampered, tool.clone(), "ws").await,
            Err(RegistryError::Integrity(_))
        ));

        let wrong_world = manifest(PackageKind::ProviderAdapter, "1.0.0", &tool);
        let error = registry.publish(&wrong_world, tool.clone(), "ws").await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("must export 'tollgate:provider/adapter@0.1.0'"),
            "{error}"
        );
        // Nothing was indexed, so the version is still free for a correct upload.
        assert!(registry.index.versions(&wrong_world.name).await.is_err());
    }
}
