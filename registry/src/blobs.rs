//! Content-addressed blob storage through `object_store`: a local directory by
//! default, any S3-compatible service by configuration. A blob is stored under
//! its SHA-256 and checked against it both when written and when read, so a
//! blob altered at rest is refused rather than served.
//!
//! Gateways that share a Postgres database but keep blobs on their own disks
//! (the default `local` backend) also keep a copy of each blob in the
//! database ([`BlobStore::with_database_copies`]): a package published
//! through one gateway is then fetched by digest, verified and cached by any
//! other the first time it needs it. With S3 the bucket is the shared copy.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde::{Deserialize, Serialize};

use crate::Digest;

/// Where blobs live. `s3` needs a bucket; endpoint and credentials default to
/// the usual `AWS_*` environment when not given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "lowercase", deny_unknown_fields)]
pub enum StorageConfig {
    /// `<data_dir>/registry/blobs` unless `path` is set.
    #[default]
    #[serde(alias = "filesystem")]
    Local,
    S3 {
        bucket: String,
        #[serde(default)]
        endpoint: Option<String>,
        #[serde(default = "default_region")]
        region: String,
        #[serde(default)]
        access_key_id: Option<String>,
        #[serde(default)]
        secret_access_key: Option<String>,
        /// Key prefix inside the bucket.
        #[serde(default)]
        prefix: Option<String>,
    },
}

fn default_region() -> String {
    "us-east-1".into()
}

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob {0} not found")]
    NotFound(Digest),
    #[error("content does not match its digest: expected {expected}, got {actual}")]
    DigestMismatch { expected: Digest, actual: Digest },
    #[error("blob storage failed: {0}")]
    Storage(String),
}

#[derive(Clone)]
pub struct BlobStore {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    description: String,
    /// Where other gateways find what this one stored (`registry_blob_copies`).
    copies: Option<sqlx::AnyPool>,
}

/// An opened object store: where keys go (with the configured key prefix,
/// ending in `/` when set) and a description for logs. The registry keeps its
/// blobs here; other data (the request-log archive) shares the same choice
/// of backends.
#[derive(Clone)]
pub struct OpenedStore {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: String,
    pub description: String,
}

impl OpenedStore {
    /// Opens the configured store; `local_root` is the directory used by the
    /// local backend.
    pub fn open(config: &StorageConfig, local_root: &Path) -> Result<Self, BlobError> {
        let storage = |e: object_store::Error| BlobError::Storage(e.to_string());
        match config {
            StorageConfig::Local => {
                std::fs::create_dir_all(local_root)
                    .map_err(|e| BlobError::Storage(format!("cannot create {}: {e}", local_root.display())))?;
                let store = LocalFileSystem::new_with_prefix(local_root).map_err(storage)?;
                Ok(Self {
                    store: Arc::new(store),
                    prefix: String::new(),
                    description: format!("local directory {}", local_root.display()),
                })
            }
            StorageConfig::S3 {
                bucket,
                endpoint,
                region,
                access_key_id,
                secret_access_key,
                prefix,
            } => {
                let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_region(region);
                if let Some(endpoint) = endpoint {
                    // Self-hosted S3-compatible services usually want path-style
                    // addressing and may be plain HTTP.
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"))
                        .with_virtual_hosted_style_request(false);
                }
                if let Some(key) = access_key_id {
                    builder = builder.with_access_key_id(key);
                }
                if let Some(secret) = secret_access_key {
                    builder = builder.with_secret_access_key(secret);
                }
                let store = builder.build().map_err(storage)?;
                let prefix = prefix.as_deref().unwrap_or("").trim_matches('/');
                Ok(Self {
                    store: Arc::new(store),
                    prefix: if prefix.is_empty() {
                        String::new()
                    } else {
                        format!("{prefix}/")
                    },
                    description: format!("s3 bucket {bucket}"),
                })
            }
        }
    }
}

impl BlobStore {
    /// Opens the configured store; `local_root` is the directory used by the
    /// local backend.
    pub fn open(config: &StorageConfig, local_root: &Path) -> Result<Self, BlobError> {
        let OpenedStore {
            store,
            prefix,
            description,
        } = OpenedStore::open(config, local_root)?;
        Ok(Self {
            store,
            prefix,
            description,
            copies: None,
        })
    }

    /// Also keeps every blob in `pool`'s `registry_blob_copies` table, and
    /// reads a blob missing from this store from there. For gateways that
    /// share a database but not a blob store.
    pub fn with_database_copies(mut self, pool: sqlx::AnyPool) -> Self {
        self.description.push_str(", with copies in the database");
        self.copies = Some(pool);
        self
    }

    /// Where the blobs are, for logs.
    pub fn describe(&self) -> &str {
        &self.description
    }

    fn path(&self, digest: &Digest) -> ObjectPath {
        ObjectPath::from(format!("{}blobs/sha256/{}", self.prefix, digest.hex()))
    }

    /// Stores `content` if it hashes to `expected`. Storing the same content
    /// twice is harmless: the address is the content.
    pub async fn put(&self, expected: &Digest, content: Bytes) -> Result<(), BlobError> {
        let actual = Digest::of(&content);
        if &actual != expected {
            return Err(BlobError::DigestMismatch {
                expected: expected.clone(),
                actual,
            });
        }
        // Copied before the local write, so a blob this gateway has is one
        // every gateway can have.
        self.copy_to_database(expected, &content).await?;
        self.put_here(expected, content).await
    }

    async fn copy_to_database(&self, digest: &Digest, content: &[u8]) -> Result<(), BlobError> {
        let Some(pool) = &self.copies else {
            return Ok(());
        };
        sqlx::query(
            "INSERT INTO registry_blob_copies (digest, content, size) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(digest.to_string())
        .bind(content.to_vec())
        .bind(content.len() as i64)
        .execute(pool)
        .await
        .map_err(|e| BlobError::Storage(format!("copying the blob to the database: {e}")))?;
        Ok(())
    }

    /// Copies to the database the blobs of published versions that have no
    /// copy there but are in this store: what gateways stored before they
    /// kept copies. Returns how many were copied; a blob this store lacks is
    /// left for the gateway that has it.
    pub async fn share_missing_copies(&self) -> Result<usize, BlobError> {
        let Some(pool) = &self.copies else {
            return Ok(0);
        };
        let missing: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT v.digest FROM registry_versions v \
             WHERE NOT EXISTS (SELECT 1 FROM registry_blob_copies c WHERE c.digest = v.digest)",
        )
        .fetch_all(pool)
        .await
        .map_err(|e| BlobError::Storage(format!("listing blobs without a database copy: {e}")))?;
        let mut copied = 0;
        for digest in missing {
            let Ok(digest) = digest.parse::<Digest>() else { continue };
            let content = match self.store.get(&self.path(&digest)).await {
                Ok(found) => found.bytes().await.map_err(|e| BlobError::Storage(e.to_string()))?,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(BlobError::Storage(e.to_string())),
            };
            verify(&digest, &content)?;
            self.copy_to_database(&digest, &content).await?;
            copied += 1;
        }
        Ok(copied)
    }

    async fn put_here(&self, digest: &Digest, content: Bytes) -> Result<(), BlobError> {
        self.store
            .put(&self.path(digest), PutPayload::from_bytes(content))
            .await
            .map_err(|e| BlobError::Storage(e.to_string()))?;
        Ok(())
    }

    /// Stores `content` here unless it already is (the built-ins, which
    /// every gateway carries, at each start). No database copy is made:
    /// every gateway has these bytes.
    pub async fn ensure_here(&self, expected: &Digest, content: Bytes) -> Result<(), BlobError> {
        verify(expected, &content)?;
        match self.store.head(&self.path(expected)).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => self.put_here(expected, content).await,
            Err(e) => Err(BlobError::Storage(e.to_string())),
        }
    }

    /// The blob with this digest, verified. Missing here, it is read from
    /// the database copy (when kept), verified, and stored here for next time.
    pub async fn get(&self, digest: &Digest) -> Result<Bytes, BlobError> {
        let content = match self.store.get(&self.path(digest)).await {
            Ok(result) => result.bytes().await.map_err(|e| BlobError::Storage(e.to_string()))?,
            Err(object_store::Error::NotFound { .. }) => {
                let content = self.copy_of(digest).await?;
                verify(digest, &content)?;
                self.put_here(digest, content.clone()).await?;
                return Ok(content);
            }
            Err(e) => return Err(BlobError::Storage(e.to_string())),
        };
        verify(digest, &content)?;
        Ok(content)
    }

    async fn copy_of(&self, digest: &Digest) -> Result<Bytes, BlobError> {
        let Some(pool) = &self.copies else {
            return Err(BlobError::NotFound(digest.clone()));
        };
        let found: Option<Vec<u8>> = sqlx::query_scalar("SELECT content FROM registry_blob_copies WHERE digest = $1")
            .bind(digest.to_string())
            .fetch_optional(pool)
            .await
            .map_err(|e| BlobError::Storage(format!("reading the blob's database copy: {e}")))?;
        found
            .map(Bytes::from)
            .ok_or_else(|| BlobError::NotFound(digest.clone()))
    }
}

fn verify(expected: &Digest, content: &[u8]) -> Result<(), BlobError> {
    let actual = Digest::of(content);
    if &actual != expected {
        return Err(BlobError::DigestMismatch {
            expected: expected.clone(),
            actual,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn verifies_on_write_and_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(&StorageConfig::Local, dir.path()).unwrap();
        let content = Bytes::from_static(b"component bytes");
        let digest = Digest::of(&content);

        let wrong = Digest::of(b"something else");
        assert!(matches!(
            store.put(&wrong, content.clone()).await,
            Err(BlobError::DigestMismatch { .. })
        ));
        assert!(matches!(store.get(&digest).await, Err(BlobError::NotFound(_))));

        store.put(&digest, content.clone()).await.unwrap();
        assert_eq!(store.get(&digest).await.unwrap(), content);

        // Altered at rest: refused on read.
        let file = dir.path().join("blobs/sha256").join(digest.hex());
        std::fs::write(&file, b"tampered").unwrap();
        assert!(matches!(
            store.get(&digest).await,
            Err(BlobError::DigestMismatch { .. })
        ));
    }

    #[test]
    fn storage_config_parses() {
        let s3: StorageConfig = serde_json::from_value(serde_json::json!({
            "backend": "s3", "bucket": "b", "endpoint": "http://127.0.0.1:5000"
        }))
        .unwrap();
        assert!(matches!(s3, StorageConfig::S3 { ref region, .. } if region == "us-east-1"));
        let local: StorageConfig = serde_json::from_value(serde_json::json!({"backend": "local"})).unwrap();
        assert_eq!(local, StorageConfig::Local);
    }
}
