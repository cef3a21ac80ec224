//! What the registry checks of a version before anything of it runs, and what
//! an install shows of it: the stored manifest must still be the one
//! published, a signature must verify against its namespace's key, and the
//! content must hash to its digest. The outcome names the signer
//! ([`Signer`]); whether a workspace accepts it is `policy.rs`.

use bytes::Bytes;
use schemars::JsonSchema;
use serde::Serialize;

use crate::signing::{self, PackageSignature, SignatureError};
use crate::{Manifest, Registry, RegistryError, VersionRecord};

/// Who signed a version, as installs and `packages.get` show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Signer {
    /// The signing key's id (see `namespaces.keys.list`).
    pub key_id: String,
    /// The namespace whose key it must be: the package's.
    pub namespace: String,
    /// The signature is over this version's manifest and content, by a key
    /// registered for the namespace and not revoked.
    pub verified: bool,
    /// Why it is not verified, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<SignerProblem>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignerProblem {
    /// No key of this id is registered for the namespace.
    UnknownKey,
    /// The key was revoked.
    RevokedKey,
}

/// A version's content, checked, with its signer (`None`: unsigned).
pub struct Verified {
    pub content: Bytes,
    pub signer: Option<Signer>,
}

impl Registry {
    /// Checks the version without reading its content: the stored manifest
    /// must hash to the digest recorded at publish (else `Integrity`), and a
    /// signature by a key the namespace has (revoked or not) must verify
    /// (else `SignatureInvalid`: the manifest or the signature was altered).
    /// A signature by a key the namespace does not have cannot be checked,
    /// and is answered unverified.
    pub async fn signer(&self, record: &VersionRecord) -> Result<Option<Signer>, RegistryError> {
        let label = || format!("{}@{}", record.name, record.version);
        let digest = signing::manifest_digest(&record.manifest)
            .map_err(|e| RegistryError::Integrity(format!("the stored manifest of {} is unreadable: {e}", label())))?;
        if let Some(recorded) = &record.manifest_digest
            && *recorded != digest
        {
            return Err(RegistryError::Integrity(format!(
                "the stored manifest of {} hashes to {digest}, not to {recorded} as published: it was altered in storage; refusing to use it",
                label()
            )));
        }
        let Some(signature) = &record.signature else {
            return Ok(None);
        };
        let namespace = record.name.namespace();
        let key = self.index.signing_key(namespace, &signature.key_id).await?;
        let mut signer = Signer {
            key_id: signature.key_id.clone(),
            namespace: namespace.to_string(),
            verified: false,
            problem: Some(SignerProblem::UnknownKey),
        };
        let Some(key) = key else {
            return Ok(Some(signer));
        };
        signing::verify(&record.manifest, signature, &key.public_key()?).map_err(|e| {
            RegistryError::SignatureInvalid(format!(
                "the signature of {} by key {} does not verify: {e}; refusing to use it",
                label(),
                signature.key_id
            ))
        })?;
        signer.verified = !key.is_revoked();
        signer.problem = key.is_revoked().then_some(SignerProblem::RevokedKey);
        Ok(Some(signer))
    }

    /// The version's content and signer, every check passed ([`Registry::signer`],
    /// then the content against its digest and its kind's world).
    pub async fn verified(&self, record: &VersionRecord) -> Result<Verified, RegistryError> {
        let signer = self.signer(record).await?;
        let content = self.content_unvetted(record).await?;
        Ok(Verified { content, signer })
    }

    /// Signs a version stored unsigned (published before signatures were
    /// kept: an upgraded gateway's built-ins), when the stored manifest is
    /// exactly `manifest` and `signature` is valid for it. Returns whether
    /// it signed; a signed version, or one whose manifest differs, is left
    /// as it is.
    pub async fn sign_unsigned(
        &self,
        manifest: &Manifest,
        signature: &PackageSignature,
    ) -> Result<bool, RegistryError> {
        let record = self.index.version(&manifest.name, &manifest.version).await?;
        let digest = signing::manifest_digest(manifest).map_err(|e| RegistryError::Invalid(e.to_string()))?;
        let stored = signing::manifest_digest(&record.manifest).map_err(|e| RegistryError::Integrity(e.to_string()))?;
        if record.signature.is_some() || stored != digest {
            return Ok(false);
        }
        self.check_new_signature(manifest, signature).await?;
        Ok(self
            .index
            .add_signature(&manifest.name, &manifest.version, &digest, signature)
            .await?)
    }

    /// Checks a signature sent with a publish: it must be by a key registered
    /// for the package's namespace, not revoked, and over this manifest.
    pub(crate) async fn check_new_signature(
        &self,
        manifest: &Manifest,
        signature: &PackageSignature,
    ) -> Result<(), RegistryError> {
        let invalid = |message: String| RegistryError::SignatureInvalid(message);
        signature.check_form().map_err(|e| invalid(e.to_string()))?;
        let namespace = manifest.name.namespace();
        let key = self
            .index
            .signing_key(namespace, &signature.key_id)
            .await?
            .ok_or_else(|| {
                invalid(format!(
                    "key {} is not registered for namespace '{namespace}'; add its public key first (`tollgate namespaces keys add {namespace} PUBLIC_KEY`)",
                    signature.key_id
                ))
            })?;
        if key.is_revoked() {
            return Err(invalid(format!(
                "key {} of namespace '{namespace}' was revoked; sign with another key",
                signature.key_id
            )));
        }
        match signing::verify(manifest, signature, &key.public_key()?) {
            Ok(()) => Ok(()),
            Err(SignatureError::Mismatch) => {
                let digest = signing::manifest_digest(manifest).map_err(|e| invalid(e.to_string()))?;
                Err(invalid(format!(
                    "the signature by key {} is not over this package: the registry signs {}@{} with manifest digest {digest} and content digest {} (docs/registry.md, \"What is signed\")",
                    signature.key_id, manifest.name, manifest.version, manifest.content.digest
                )))
            }
            Err(e) => Err(invalid(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use ed25519_dalek::SigningKey;

    use super::*;
    use crate::blobs::{BlobStore, StorageConfig};
    use crate::component::tests::component_exporting;
    use crate::registry::tests::{manifest, registry};
    use crate::signing::{PublicKey, sign};
    use crate::{PackageKind, Registry};

    fn adapter() -> Bytes {
        Bytes::from(component_exporting("tollgate:provider/adapter@0.1.0"))
    }

    async fn tamper(registry: &Registry, sql: &str) {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&registry.index.pool)
            .await
            .unwrap();
    }

    /// Publish signed, read back verified; then what a revocation and
    /// altered storage (the manifest row, the signature, the blob) do.
    #[tokio::test]
    async fn a_signed_version_verifies_until_altered_or_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let key = SigningKey::from_bytes(&[3; 32]);
        let public = PublicKey::of(&key);
        registry
            .index
            .add_signing_key("acme", &public, "ci", "ws_1")
            .await
            .unwrap();
        let content = adapter();
        let v1 = manifest(PackageKind::ProviderAdapter, "1.0.0", &content);
        let signature = sign(&v1, &key).unwrap();
        let published = registry
            .publish_signed(&v1, content.clone(), Some(&signature), "ws_1")
            .await
            .unwrap();
        assert_eq!(published.signed_by.as_deref(), Some(public.key_id().as_str()));
        let record = registry.index.version(&v1.name, &v1.version).await.unwrap();
        assert_eq!(record.signature.as_ref(), Some(&signature));
        let verified = registry.verified(&record).await.unwrap();
        assert_eq!(verified.content, content);
        let signer = verified.signer.unwrap();
        assert!(signer.verified && signer.problem.is_none(), "{signer:?}");
        assert_eq!(
            (signer.namespace.as_str(), signer.key_id.as_str()),
            ("acme", public.key_id().as_str())
        );

        // An unsigned version has no signer, and its manifest is checked too.
        let v2 = manifest(PackageKind::ProviderAdapter, "2.0.0", &content);
        registry.publish(&v2, content.clone(), "ws_1").await.unwrap();
        let unsigned = registry.index.version(&v2.name, &v2.version).await.unwrap();
        assert!(registry.verified(&unsigned).await.unwrap().signer.is_none());

        // A flipped byte in a stored manifest (its description) is refused,
        // signed or not: the manifest no longer hashes to what was published.
        tamper(
            &registry,
            "UPDATE registry_versions SET manifest = REPLACE(manifest, 'Echoes', 'Echoed')",
        )
        .await;
        for version in [&v1.version, &v2.version] {
            let record = registry.index.version(&v1.name, version).await.unwrap();
            match registry.verified(&record).await {
                Err(RegistryError::Integrity(message)) => {
                    assert!(message.contains("altered in storage"), "{message}")
                }
                other => panic!("{:?}", other.map(|v| v.signer)),
            }
        }
        // Altering the recorded digest too is caught by the signature.
        let altered = registry.index.version(&v1.name, &v1.version).await.unwrap();
        let digest = signing::manifest_digest(&altered.manifest).unwrap();
        tamper(
            &registry,
            &format!("UPDATE registry_versions SET manifest_digest = '{digest}' WHERE version = '1.0.0'"),
        )
        .await;
        let altered = registry.index.version(&v1.name, &v1.version).await.unwrap();
        assert!(matches!(
            registry.verified(&altered).await,
            Err(RegistryError::SignatureInvalid(_))
        ));
        // A manifest that no longer parses reads as altered too.
        tamper(
            &registry,
            "UPDATE registry_versions SET manifest = REPLACE(manifest, '{', '[') WHERE version = '2.0.0'",
        )
        .await;
        assert!(matches!(
            registry
                .index
                .version(&v2.name, &v2.version)
                .await
                .map_err(RegistryError::from),
            Err(RegistryError::Integrity(_))
        ));
        tamper(
            &registry,
            "UPDATE registry_versions SET manifest = REPLACE(manifest, 'Echoed', 'Echoes'), manifest_digest = NULL",
        )
        .await;
        registry.verified(&record).await.unwrap();

        // Revoked: still checked (an altered signature is refused), shown unverified.
        registry
            .index
            .revoke_signing_key("acme", &public.key_id())
            .await
            .unwrap();
        let signer = registry.signer(&record).await.unwrap().unwrap();
        assert!(!signer.verified);
        assert_eq!(signer.problem, Some(SignerProblem::RevokedKey));

        // A flipped byte in the stored blob is refused.
        let file = dir.path().join("blobs/blobs/sha256").join(v1.content.digest.hex());
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[10] ^= 1;
        std::fs::write(&file, bytes).unwrap();
        match registry.verified(&record).await {
            Err(RegistryError::Integrity(message)) => {
                assert!(message.contains("does not match its digest"), "{message}")
            }
            other => panic!("{:?}", other.map(|v| v.signer)),
        }
    }

    /// A gateway that reads the blob from the database copy verifies it the
    /// same way: a flipped byte there is refused, and nothing is cached.
    #[tokio::test]
    async fn a_flipped_byte_in_the_database_copy_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = registry(dir.path()).await;
        let pool = first.index.pool.clone();
        let first = Registry::new(first.index, first.blobs.with_database_copies(pool.clone()));
        let content = adapter();
        let v1 = manifest(PackageKind::ProviderAdapter, "1.0.0", &content);
        first.publish(&v1, content.clone(), "ws_1").await.unwrap();
        let second_dir = dir.path().join("second");
        let second = Registry::new(
            first.index.clone(),
            BlobStore::open(&StorageConfig::Local, &second_dir)
                .unwrap()
                .with_database_copies(pool.clone()),
        );
        let mut flipped = content.to_vec();
        flipped[10] ^= 1;
        sqlx::query("UPDATE registry_blob_copies SET content = $1")
            .bind(flipped)
            .execute(&pool)
            .await
            .unwrap();
        let record = second.index.version(&v1.name, &v1.version).await.unwrap();
        assert!(matches!(
            second.verified(&record).await,
            Err(RegistryError::Integrity(_))
        ));
        assert!(!second_dir.join("blobs/sha256").join(v1.content.digest.hex()).exists());
    }

    /// A version stored before signatures were kept is signed afterwards
    /// only with its own manifest and a valid signature, and only once.
    #[tokio::test]
    async fn an_unsigned_version_from_before_is_signed_only_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let key = SigningKey::from_bytes(&[5; 32]);
        registry
            .index
            .add_signing_key("acme", &PublicKey::of(&key), "", "")
            .await
            .unwrap();
        let content = adapter();
        let v1 = manifest(PackageKind::ProviderAdapter, "1.0.0", &content);
        registry.publish(&v1, content.clone(), "gateway").await.unwrap();
        tamper(&registry, "UPDATE registry_versions SET manifest_digest = NULL").await;

        let mut other = v1.clone();
        other.description = "not what is stored".into();
        assert!(
            !registry
                .sign_unsigned(&other, &sign(&other, &key).unwrap())
                .await
                .unwrap()
        );
        assert!(matches!(
            registry.sign_unsigned(&v1, &sign(&other, &key).unwrap()).await,
            Err(RegistryError::SignatureInvalid(_))
        ));
        assert!(registry.sign_unsigned(&v1, &sign(&v1, &key).unwrap()).await.unwrap());
        assert!(
            !registry.sign_unsigned(&v1, &sign(&v1, &key).unwrap()).await.unwrap(),
            "once"
        );
        let record = registry.index.version(&v1.name, &v1.version).await.unwrap();
        assert!(record.manifest_digest.is_some());
        assert!(registry.signer(&record).await.unwrap().unwrap().verified);
    }

    #[tokio::test]
    async fn a_publish_signature_must_be_the_namespaces_and_over_this_package() {
        let dir = tempfile::tempdir().unwrap();
        let registry = registry(dir.path()).await;
        let key = SigningKey::from_bytes(&[4; 32]);
        let content = adapter();
        let v1 = manifest(PackageKind::ProviderAdapter, "1.0.0", &content);
        let refused = |result: Result<crate::Published, RegistryError>, words: &str| match result {
            Err(RegistryError::SignatureInvalid(message)) => assert!(message.contains(words), "{message}"),
            other => panic!("expected signature_invalid ({words}): {other:?}"),
        };
        refused(
            registry
                .publish_signed(&v1, content.clone(), Some(&sign(&v1, &key).unwrap()), "ws")
                .await,
            "not registered",
        );
        registry
            .index
            .add_signing_key("acme", &PublicKey::of(&key), "", "ws")
            .await
            .unwrap();
        let v2 = manifest(PackageKind::ProviderAdapter, "2.0.0", &content);
        refused(
            registry
                .publish_signed(&v1, content.clone(), Some(&sign(&v2, &key).unwrap()), "ws")
                .await,
            "not over this package",
        );
        assert!(
            registry.index.versions(&v1.name).await.is_err(),
            "nothing was published"
        );
        registry
            .index
            .revoke_signing_key("acme", &PublicKey::of(&key).key_id())
            .await
            .unwrap();
        refused(
            registry
                .publish_signed(&v1, content.clone(), Some(&sign(&v1, &key).unwrap()), "ws")
                .await,
            "revoked",
        );
        // A revoked key stays revoked.
        assert!(
            registry
                .index
                .add_signing_key("acme", &PublicKey::of(&key), "", "ws")
                .await
                .is_err()
        );
    }
}
