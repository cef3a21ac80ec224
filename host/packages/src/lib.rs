//! The package registry inside the gateway: opening it (`[registry]` config),
//! seeding the built-in adapters into it, the HTTP API (`api.rs`) and
//! hot-installed provider adapters (`installs.rs`), and workspace namespaces
//! (`namespaces.rs`), and whom installs trust: namespaces' signing keys and
//! workspaces' package policies (`trust.rs`). [`Packages`] is this concern's handler state and the
//! API the control plane's `packages.*` and `adapters.*` operations call; its
//! errors are [`PackageError`] (`error.rs`). The package model, storage and index are
//! the `tollgate-registry` crate. This concern owns the `namespaces` and
//! `registry_installs` tables; the registry crate owns the rest of
//! `registry_*`.

#![forbid(unsafe_code)]

pub mod api;
mod error;
pub mod installs;
pub mod namespaces;
pub mod trust;
use namespaces::NamespaceError;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tollgate_registry::signing::PublicKey;
use tollgate_registry::{
    BlobStore, Index, Manifest, PackageKind, PackageName, PackageSignature, PackageSummary, Registry, RegistryError,
    StorageConfig, VersionRecord, Visibility,
};

pub use error::PackageError;
pub use installs::Installs;

use namespaces::Namespaces;
use tollgate_core::db::{Backend, Database};
use tollgate_gateway::RouteTable;
use tollgate_identity::auth::Principal;
use tollgate_identity::auth::permissions::Role;
use tollgate_plugin_host::Adapters;
use tollgate_routing::ProviderConfig;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// Blob storage: `{ backend = "local" }` (under `<data_dir>/registry`) or
    /// `{ backend = "s3", bucket = "…", endpoint = "…" }`.
    pub storage: StorageConfig,
    /// Workspaces whose owners and admins may install adapters for providers
    /// (a gateway-wide change). Empty: nobody installs over the API; adapters
    /// can still be pinned by reference in `[providers]`.
    pub operator_workspaces: Vec<String>,
    /// How often to pick up installs made by other gateways sharing the
    /// database (milliseconds; 0: never).
    pub install_poll_ms: u64,
    /// Bytes of package content (`PUT /v1/blobs`) one workspace may upload in
    /// all, each blob counted once; over it, 413. 0: no quota.
    pub workspace_quota_bytes: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            storage: StorageConfig::default(),
            operator_workspaces: Vec::new(),
            install_poll_ms: 1_000,
            workspace_quota_bytes: 1 << 30,
        }
    }
}

/// The namespace of the gateway's own packages; no workspace can claim it.
pub const BUILTIN_NAMESPACE: &str = "tollgate";
/// Stands for the gateway itself as the owner of [`BUILTIN_NAMESPACE`].
pub const GATEWAY_OWNER: &str = "";

/// Opens the registry on `database`. With blobs on this gateway's own disk
/// and the index in Postgres, which other gateways may share, every blob is
/// also kept in the database, so a package published through any gateway
/// loads on all of them (an S3 bucket is shared already).
pub fn open(config: &RegistryConfig, data_dir: &Path, database: &Database) -> anyhow::Result<Registry> {
    let mut blobs = BlobStore::open(&config.storage, &data_dir.join("registry")).context("registry storage")?;
    if config.storage == StorageConfig::Local && database.backend == Backend::Postgres {
        blobs = blobs.with_database_copies(database.pool.clone());
    }
    tracing::info!(storage = blobs.describe(), "package registry");
    Ok(Registry::new(Index::new(database.pool.clone()), blobs))
}

/// The packages concern's handler state: the registry, the installs, the
/// namespaces, and the route table an install rebuilds (through
/// [`RouteTable::rebuild`], the data plane's API).
pub struct Packages {
    registry: Registry,
    installs: Installs,
    namespaces: Namespaces,
    routes: Arc<RouteTable>,
    adapters: Arc<Adapters>,
    /// Where `registry_installs` lives.
    database: Database,
    /// `registry.workspace_quota_bytes`.
    quota_bytes: u64,
}

impl Packages {
    pub fn new(
        registry: Registry,
        installs: Installs,
        routes: Arc<RouteTable>,
        adapters: Arc<Adapters>,
        database: Database,
        quota_bytes: u64,
    ) -> Self {
        Self {
            registry,
            installs,
            namespaces: Namespaces::new(database.clone()),
            routes,
            adapters,
            database,
            quota_bytes,
        }
    }

    pub fn namespaces(&self) -> &Namespaces {
        &self.namespaces
    }

    /// Creates the namespace `name` in the workspace (at most `limit` per
    /// workspace, 0: no limit), unless another workspace holds the name or the
    /// registry gave it to another workspace by a publish.
    pub async fn create_namespace(
        &self,
        workspace_id: &str,
        name: &str,
        limit: u32,
    ) -> Result<namespaces::Namespace, NamespaceError> {
        if self.registry_claim_elsewhere(workspace_id, name).await? {
            return Err(NamespaceError::Taken(name.to_string()));
        }
        self.namespaces.create(workspace_id, name, limit).await
    }

    /// Whether the name is this workspace's alone: it holds it, created it
    /// before any other workspace did, and the registry gave it to no other.
    /// Deployments (`/v1/actors/{namespace}/…`) need this.
    pub async fn namespace_owned_by(&self, workspace_id: &str, name: &str) -> Result<bool, NamespaceError> {
        Ok(self.namespaces.held_first_by(workspace_id, name).await?
            && !self.registry_claim_elsewhere(workspace_id, name).await?)
    }

    async fn registry_claim_elsewhere(&self, workspace_id: &str, name: &str) -> Result<bool, NamespaceError> {
        let owner = self.registry.index.namespace_owner(name).await.map_err(|e| match e {
            tollgate_registry::index::IndexError::Database(e) => NamespaceError::Database(e),
            other => NamespaceError::Database(sqlx::Error::Protocol(other.to_string())),
        })?;
        Ok(owner.is_some_and(|owner| owner != workspace_id))
    }

    /// The registry itself, for concerns that resolve packages (actors).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The packages of `kind` matching `text` that `viewer` (a workspace, or
    /// none for an anonymous caller) may read.
    pub async fn search(
        &self,
        kind: Option<PackageKind>,
        text: Option<&str>,
        limit: u32,
        viewer: Option<&str>,
    ) -> Result<Vec<PackageSummary>, RegistryError> {
        self.registry.search(kind, text, limit, viewer).await
    }

    /// Whether `viewer` may read the package: it is public, or `viewer` is
    /// the workspace that owns it.
    pub async fn readable_by(&self, name: &PackageName, viewer: Option<&str>) -> Result<bool, RegistryError> {
        Ok(self.registry.index.readable_by(name, viewer).await?)
    }

    /// A package's versions, newest first. A private package is not found
    /// by anyone but its workspace.
    pub async fn versions(
        &self,
        name: &PackageName,
        viewer: Option<&str>,
    ) -> Result<Vec<VersionRecord>, RegistryError> {
        if !self.readable_by(name, viewer).await? {
            return Err(RegistryError::NotFound(format!("package {name} not found")));
        }
        Ok(self.registry.index.versions(name).await?)
    }

    /// Who signed a version, checked now (see [`Registry::signer`]).
    pub async fn signer(&self, record: &VersionRecord) -> Result<Option<tollgate_registry::Signer>, RegistryError> {
        self.registry.signer(record).await
    }

    /// Yanks, unyanks or deprecates a version, for a workspace that may
    /// publish in the package's namespace; answers the version as it is then.
    pub async fn change_version(
        &self,
        workspace_id: &str,
        name: &PackageName,
        version: &semver::Version,
        change: VersionChange<'_>,
    ) -> Result<VersionRecord, PackageError> {
        self.check_namespace(workspace_id, name.namespace()).await?;
        match change {
            VersionChange::Yank(yanked) => self.registry.yank(name, version, yanked).await?,
            VersionChange::Deprecate(message) => self.registry.deprecate(name, version, message).await?,
        }
        Ok(self
            .registry
            .index
            .version(name, version)
            .await
            .map_err(RegistryError::from)?)
    }

    /// Makes a package public or private (its blobs included).
    pub async fn set_visibility(&self, name: &PackageName, visibility: Visibility) -> Result<(), RegistryError> {
        Ok(self.registry.index.set_visibility(name, visibility).await?)
    }

    /// Which adapter version serves each provider, by install.
    pub fn adapter_installs(&self) -> Vec<installs::InstallRecord> {
        self.installs.list()
    }

    /// Applies a new configuration (a reload): loads the adapters it pins by
    /// reference, takes its operators, and rebuilds the routes from its
    /// providers with every install applied. Returns the pricing snapshot id.
    pub async fn reload(
        &self,
        providers: &BTreeMap<String, ProviderConfig>,
        operators: &[String],
    ) -> anyhow::Result<i64> {
        // Under the installs lock: an install that runs while this rebuild
        // is under way would otherwise be overwritten by a table built from
        // the overlay taken before it.
        let _serial = self.installs.serial.lock().await;
        installs::load_references(&self.registry, &self.adapters, providers).await?;
        self.installs.set_operators(operators);
        self.routes.rebuild(&self.installs.overlay(Some(providers))).await
    }

    /// Whether `workspace_id` may publish in `namespace`: it has a namespace of
    /// that name, and no other workspace published there first (the first
    /// publish claims the namespace in the registry). The built-in namespace
    /// is reserved.
    pub async fn check_namespace(&self, workspace_id: &str, namespace: &str) -> Result<(), PackageError> {
        let denied = || {
            PackageError::Forbidden(format!(
                "This workspace may not publish in namespace '{namespace}'. Create the namespace in your workspace first (`tollgate namespaces create {namespace}`); a namespace belongs to the first workspace that publishes in it."
            ))
        };
        if namespace == BUILTIN_NAMESPACE || !self.namespaces.held_by(workspace_id, namespace).await? {
            return Err(denied());
        }
        let owner = self
            .registry
            .index
            .claim_namespace(namespace, workspace_id)
            .await
            .map_err(RegistryError::from)?;
        if owner != workspace_id {
            return Err(denied());
        }
        Ok(())
    }

    /// Publishes `manifest` with its `content` in one step (the control-plane
    /// path; HTTP uploads the blob first): the namespace must be the
    /// workspace's, the content is counted against the workspace's upload
    /// quota before it is stored, and the registry checks it against the
    /// manifest's digest, size and world, and checks the signature if any.
    pub async fn publish_with_content(
        &self,
        workspace_id: &str,
        publisher: &str,
        manifest: &tollgate_registry::Manifest,
        content: Bytes,
        signature: Option<&PackageSignature>,
    ) -> Result<tollgate_registry::Published, PackageError> {
        self.check_namespace(workspace_id, manifest.name.namespace()).await?;
        let digest = tollgate_registry::Digest::of(&content);
        if digest != manifest.content.digest || content.len() as u64 != manifest.content.size {
            return Err(RegistryError::Integrity(format!(
                "the content is {} bytes with digest {digest}, but the manifest says {} bytes with digest {}",
                content.len(),
                manifest.content.size,
                manifest.content.digest
            ))
            .into());
        }
        let counted = self
            .registry
            .index
            .reserve_upload(workspace_id, &digest, content.len() as u64, self.quota_bytes)
            .await
            .map_err(|e| match e {
                tollgate_registry::QuotaError::Exceeded { used, quota, size } => PackageError::QuotaExceeded(format!(
                    "Workspace '{workspace_id}' has uploaded {used} bytes of package content; this {size}-byte package would pass its quota of {quota} bytes (registry.workspace_quota_bytes)."
                )),
                tollgate_registry::QuotaError::Database(e) => RegistryError::Storage(e.to_string()).into(),
            })?;
        let stored = async {
            self.registry.blobs.put(&digest, content.clone()).await?;
            self.registry
                .publish_signed(manifest, content, signature, publisher)
                .await
        }
        .await;
        if stored.is_err()
            && counted
            && let Err(undo) = self.registry.index.release_upload(workspace_id, &digest).await
        {
            tracing::error!(error = %undo, %digest, "could not return a failed publish's bytes to the quota");
        }
        Ok(stored?)
    }

    /// Installing changes the whole gateway: only owners and admins of a
    /// workspace listed in `registry.operator_workspaces` may.
    pub fn check_operator(&self, principal: &Principal) -> Result<(), PackageError> {
        let admin = matches!(principal.role, Role::Owner | Role::Admin);
        if !admin || !self.installs.is_operator(&principal.workspace_id) {
            return Err(PackageError::Forbidden(
                "Installing adapters changes the whole gateway: it needs an owner or admin key of a workspace listed in registry.operator_workspaces.".into(),
            ));
        }
        Ok(())
    }
}

/// A change to a published version's state ([`Packages::change_version`]).
pub enum VersionChange<'a> {
    /// Hide it from new installs (`true`), or undo that (`false`).
    Yank(bool),
    /// Deprecate it with a message; `None` lifts the deprecation.
    Deprecate(Option<&'a str>),
}

/// Publishes every built-in component (adapters, tool servers, skills) as
/// `tollgate/<name>@<version>` unless that exact version is already there,
/// with the manifest and signature made when the binary was built (a version
/// published unsigned by an older gateway is signed), and registers this
/// binary's built-in key for the built-in namespace (so every gateway on the
/// database can check what any of them published).
pub async fn seed_builtins(registry: &Registry) -> anyhow::Result<()> {
    registry
        .index
        .claim_namespace(BUILTIN_NAMESPACE, GATEWAY_OWNER)
        .await
        .context("claiming the built-in namespace")?;
    let key = PublicKey::parse(tollgate_plugin_host::builtin_signing_key()).context("the built-in signing key")?;
    registry
        .index
        .add_builtin_key(BUILTIN_NAMESPACE, &key)
        .await
        .context("registering the built-in signing key")?;
    for builtin in builtins() {
        let (manifest, signature) = builtin_manifest(builtin)?;
        if registry.index.version(&manifest.name, &manifest.version).await.is_ok() {
            // Published by another gateway on this database: its bytes
            // must still be in this gateway's own store. Published before
            // signatures were kept, it is signed now.
            registry
                .blobs
                .ensure_here(&manifest.content.digest, Bytes::from_static(builtin.bytes))
                .await
                .with_context(|| format!("storing the built-in {}", manifest.name))?;
            registry
                .sign_unsigned(&manifest, &signature)
                .await
                .with_context(|| format!("signing the built-in {}", manifest.name))?;
            continue;
        }
        match registry
            .publish_signed(
                &manifest,
                Bytes::from_static(builtin.bytes),
                Some(&signature),
                "gateway",
            )
            .await
        {
            Ok(_) | Err(tollgate_registry::RegistryError::Conflict(_)) => {}
            Err(e) => return Err(anyhow::anyhow!("seeding {}: {e}", manifest.name)),
        }
    }
    Ok(())
}

fn builtins() -> impl Iterator<Item = &'static tollgate_plugin_host::Builtin> {
    tollgate_plugin_host::builtin_adapters()
        .iter()
        .chain(tollgate_plugin_host::builtin_tool_servers())
        .chain(tollgate_plugin_host::builtin_skills())
        .chain(tollgate_plugin_host::builtin_guardrails())
}

/// The manifest and signature `host/plugin-host/build.rs` made for a built-in.
fn builtin_manifest(builtin: &tollgate_plugin_host::Builtin) -> anyhow::Result<(Manifest, PackageSignature)> {
    let manifest = Manifest::from_json(builtin.manifest.as_bytes())
        .with_context(|| format!("the built-in {}'s manifest", builtin.name))?;
    let signature = PackageSignature::from_header(builtin.signature)
        .with_context(|| format!("the built-in {}'s signature", builtin.name))?;
    Ok((manifest, signature))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_registry::{Digest, signing};

    /// What `build.rs` wrote must be what the registry itself would: a valid
    /// manifest in its normal form, the component's own world and digest, a
    /// version carrying the digest, and a signature by the embedded key over
    /// the registry's statement.
    #[test]
    fn builtin_manifests_and_signatures_are_the_registrys() {
        let key = PublicKey::parse(tollgate_plugin_host::builtin_signing_key()).unwrap();
        let mut count = 0;
        for builtin in builtins() {
            let (manifest, signature) = builtin_manifest(builtin).unwrap();
            assert_eq!(
                signing::manifest_digest(&manifest).unwrap(),
                Digest::of(builtin.manifest.as_bytes()),
                "{}'s manifest is the registry's canonical normal form",
                builtin.name
            );
            assert_eq!(
                manifest.name.to_string(),
                format!("{BUILTIN_NAMESPACE}/{}", builtin.name)
            );
            assert_eq!(manifest.content.digest, Digest::of(builtin.bytes));
            assert_eq!(manifest.content.size, builtin.bytes.len() as u64);
            assert_eq!(
                manifest.metadata.world.as_deref(),
                tollgate_registry::component::world_of(manifest.kind, builtin.bytes),
                "{}",
                builtin.name
            );
            let hex = Digest::of(builtin.bytes).hex()[..16].to_string();
            assert_eq!(
                manifest.version.to_string(),
                format!("{}+sha256.{hex}", env!("CARGO_PKG_VERSION"))
            );
            signing::verify(&manifest, &signature, &key).unwrap();
            count += 1;
        }
        assert!(count >= 5, "the built-ins are there");
    }
}
