//! Provenance trails too large for their request-log row, in the blob store
//! (the registry's storage, under `actor-trails/sha256/<hex>`, apart from
//! package blobs so that `GET /v1/blobs` never serves one). The row keeps a
//! [`StoredTrail`] reference; the content is checked against its digest
//! when read, like every blob.

use std::path::Path;

use bytes::Bytes;
use object_store::PutPayload;
use object_store::path::Path as ObjectPath;
use serde::{Deserialize, Serialize};
use tollgate_registry::{Digest, OpenedStore, StorageConfig};

/// What a run's row holds in place of a trail kept in the blob store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTrail {
    /// `blob`: the trail is in the blob store under `digest`.
    pub stored: String,
    /// `sha256:` of the trail's JSON as stored.
    pub digest: String,
    pub bytes: u64,
}

impl StoredTrail {
    /// The reference a row holds, if `text` is one (a trail is an object
    /// with `run_id`, never `stored`).
    pub fn parse(text: &str) -> Option<StoredTrail> {
        if text.len() > 512 {
            return None;
        }
        serde_json::from_str::<StoredTrail>(text)
            .ok()
            .filter(|stored| stored.stored == "blob")
    }
}

#[derive(Clone)]
pub struct Trails {
    opened: OpenedStore,
}

impl Trails {
    /// Opens the registry's storage; the local backend keeps trails under
    /// `<data_dir>/actor-trails`.
    pub fn open(storage: &StorageConfig, data_dir: &Path) -> anyhow::Result<Self> {
        let opened = OpenedStore::open(storage, &data_dir.join("actor-trails"))
            .map_err(|e| anyhow::anyhow!("actor trail storage: {e}"))?;
        Ok(Self { opened })
    }

    fn path(&self, digest: &Digest) -> ObjectPath {
        ObjectPath::from(format!("{}actor-trails/sha256/{}", self.opened.prefix, digest.hex()))
    }

    /// Stores `trail` (its JSON text) and answers the row's reference.
    pub async fn put(&self, trail: String) -> anyhow::Result<StoredTrail> {
        let bytes = Bytes::from(trail);
        let digest = Digest::of(&bytes);
        let size = bytes.len() as u64;
        self.opened
            .store
            .put(&self.path(&digest), PutPayload::from_bytes(bytes))
            .await?;
        Ok(StoredTrail {
            stored: "blob".into(),
            digest: digest.to_string(),
            bytes: size,
        })
    }

    /// The trail a reference names, verified against its digest.
    pub async fn get(&self, stored: &StoredTrail) -> anyhow::Result<String> {
        let digest: Digest = stored.digest.parse()?;
        let content = self.opened.store.get(&self.path(&digest)).await?.bytes().await?;
        anyhow::ensure!(
            Digest::of(&content) == digest,
            "the stored trail {digest} does not match its digest"
        );
        Ok(String::from_utf8(content.to_vec())?)
    }
}
