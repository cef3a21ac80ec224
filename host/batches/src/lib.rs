//! The Files and Batch APIs, in OpenAI's shape (`/v1/files`, `/v1/batches`):
//! a workspace uploads a JSONL file of chat-completions or embeddings
//! requests and the gateway runs it through its own pipeline, each line a
//! request of its own, held against the wallet when the line starts (not the
//! whole file at once), billed exactly and logged with the batch's id as its
//! parent. Results go to the blob store as output and error files.
//!
//! - `store`: the `files`, `batches` and `batch_results` tables (no other
//!   crate touches them).
//! - `api`: the HTTP routes.
//! - `runner`: runs a batch's lines at `batches.concurrency`, under a lease
//!   another gateway takes over if this one dies; cancel and expiry.

#![forbid(unsafe_code)]

mod api;
mod runner;
mod store;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use tollgate_core::db::Database;
use tollgate_gateway::DataPlane;
use tollgate_identity::accounts::Accounts;
use tollgate_registry::blobs::BlobStore;

pub use api::routes;

/// `[batches]` in `tollgate.toml`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct BatchConfig {
    /// Lines of one batch in flight at once.
    pub concurrency: usize,
    /// Most lines a batch file may have.
    pub max_lines: usize,
    /// Most batches one workspace may have running at once: a tenant's
    /// batches share the gateway with everyone's requests.
    pub max_running_per_workspace: usize,
    /// How long a gateway's claim on a running batch lasts without renewal;
    /// past it another gateway resumes the batch.
    pub lease_ms: u64,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
            max_lines: 50_000,
            max_running_per_workspace: 4,
            lease_ms: 30_000,
        }
    }
}

impl BatchConfig {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.concurrency >= 1, "batches.concurrency must be at least 1");
        anyhow::ensure!(self.max_lines >= 1, "batches.max_lines must be at least 1");
        anyhow::ensure!(
            self.max_running_per_workspace >= 1,
            "batches.max_running_per_workspace must be at least 1"
        );
        anyhow::ensure!(self.lease_ms >= 1_000, "batches.lease_ms must be at least 1000");
        Ok(())
    }
}

/// The service: the tables, the blob store the files live in, and the data
/// plane the lines run through.
pub struct Batches {
    store: store::Store,
    blobs: BlobStore,
    data: Arc<DataPlane>,
    /// Whether the key a batch runs as is still active.
    accounts: Accounts,
    config: BatchConfig,
}

impl Batches {
    pub fn new(
        database: Database,
        blobs: BlobStore,
        data: Arc<DataPlane>,
        accounts: Accounts,
        config: BatchConfig,
    ) -> Arc<Self> {
        Arc::new(Batches {
            store: store::Store::new(database),
            blobs,
            data,
            accounts,
            config,
        })
    }

    /// Resumes, now and every lease period, the running batches whose lease
    /// has lapsed (their gateway died, or this one restarted).
    pub fn start(self: &Arc<Self>) {
        let this = self.clone();
        tokio::spawn(async move {
            let period = Duration::from_millis(this.config.lease_ms);
            loop {
                match this.store.lapsed().await {
                    Ok(ids) => {
                        for id in ids {
                            runner::spawn(this.clone(), id);
                        }
                    }
                    Err(error) => tracing::warn!(%error, "could not look for batches to resume"),
                }
                tokio::time::sleep(period).await;
            }
        });
    }
}
