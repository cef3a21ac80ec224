//! Hot-installed provider adapters. An install binds a provider to one adapter
//! version from the registry (`registry_installs`); it overrides the catalog's
//! adapter for that provider. Installing compiles the component (cached by
//! digest and engine), adds it to the adapter map under `namespace/name@version`
//! and swaps in new routes: new requests use the new version at once, while a
//! request already running holds the routes it started with, whose adapter
//! name (and so adapter) never changes under it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::Serialize;
use sqlx::Row;
use tollgate_registry::{Capabilities, Digest, PackageKind, PackageName, Registry, Signer, VersionRecord};

use super::{PackageError, Packages};
use tollgate_core::db::Database;
use tollgate_plugin_host::Adapters;
use tollgate_routing::ProviderConfig;

#[derive(Clone, Debug, Serialize)]
pub struct InstallRecord {
    pub provider: String,
    pub package: PackageName,
    pub version: semver::Version,
    pub digest: Digest,
    /// The adapter name requests and the attempt trail show.
    pub adapter: String,
    pub installed_at_ms: i64,
    /// Who signed the version (`None`: unsigned), checked when it was loaded.
    pub signature: Option<Signer>,
    /// What it asks for (an adapter: nothing; its upstream and credential
    /// are the provider's configuration).
    pub capabilities: Capabilities,
}

/// The name an installed adapter is loaded under.
pub fn adapter_key(package: &PackageName, version: &semver::Version) -> String {
    format!("{package}@{version}")
}

/// Current installs and the provider configuration they overlay.
pub struct Installs {
    current: Mutex<BTreeMap<String, InstallRecord>>,
    /// The providers of the configuration the routes were last built from.
    providers: Mutex<BTreeMap<String, ProviderConfig>>,
    /// `registry.operator_workspaces` of the last configuration.
    operators: Mutex<Vec<String>>,
    /// One install, sync or reload at a time, so two never race to rebuild
    /// the routes.
    pub(crate) serial: tokio::sync::Mutex<()>,
}

impl Installs {
    /// Loads every recorded install from the registry. A version yanked since
    /// it was installed keeps serving: yanking hides it only from new installs.
    pub async fn load(
        database: &Database,
        registry: &Registry,
        adapters: &Adapters,
        providers: &BTreeMap<String, ProviderConfig>,
        operators: &[String],
    ) -> anyhow::Result<Self> {
        let current = read_installs(database, registry, adapters, &BTreeMap::new()).await?;
        Ok(Self {
            current: Mutex::new(current),
            providers: Mutex::new(providers.clone()),
            operators: Mutex::new(operators.to_vec()),
            serial: tokio::sync::Mutex::new(()),
        })
    }

    /// Remembers the configured providers (after a reload) and answers them
    /// with every install applied.
    pub fn overlay(&self, configured: Option<&BTreeMap<String, ProviderConfig>>) -> BTreeMap<String, ProviderConfig> {
        let mut providers = self.providers.lock().expect("installs lock poisoned");
        if let Some(configured) = configured {
            *providers = configured.clone();
        }
        let mut effective = providers.clone();
        for (provider, install) in self.current.lock().expect("installs lock poisoned").iter() {
            effective.entry(provider.clone()).or_default().adapter = Some(install.adapter.clone());
        }
        effective
    }

    pub fn set_operators(&self, operators: &[String]) {
        *self.operators.lock().expect("installs lock poisoned") = operators.to_vec();
    }

    /// Whether owners and admins of `workspace_id` may install adapters.
    pub fn is_operator(&self, workspace_id: &str) -> bool {
        self.operators
            .lock()
            .expect("installs lock poisoned")
            .iter()
            .any(|w| w == workspace_id)
    }

    pub fn list(&self) -> Vec<InstallRecord> {
        self.current
            .lock()
            .expect("installs lock poisoned")
            .values()
            .cloned()
            .collect()
    }
}

/// The recorded installs, with their adapters loaded. Installs already in
/// `known` (same version) are reused as they are.
async fn read_installs(
    database: &Database,
    registry: &Registry,
    adapters: &Adapters,
    known: &BTreeMap<String, InstallRecord>,
) -> anyhow::Result<BTreeMap<String, InstallRecord>> {
    let rows = sqlx::query("SELECT provider, package, version, installed_at FROM registry_installs")
        .fetch_all(&database.pool)
        .await?;
    let mut current = BTreeMap::new();
    for row in rows {
        let provider: String = row.try_get("provider")?;
        let package: String = row.try_get("package")?;
        let version: String = row.try_get("version")?;
        let package: PackageName = package.parse()?;
        let version: semver::Version = version.parse()?;
        let key = adapter_key(&package, &version);
        if let Some(same) = known.get(&provider).filter(|k| k.adapter == key) {
            current.insert(provider, same.clone());
            continue;
        }
        let context = || format!("install of {package}@{version} for provider '{provider}'");
        let record = registry
            .index
            .version(&package, &version)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", context()))?;
        let verified = registry
            .verified(&record)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", context()))?;
        tokio::task::block_in_place(|| adapters.add(&key, &verified.content)).with_context(context)?;
        current.insert(
            provider.clone(),
            InstallRecord {
                provider,
                capabilities: Capabilities::of(&record.manifest),
                digest: record.digest,
                package,
                version,
                adapter: key,
                installed_at_ms: row.try_get("installed_at")?,
                signature: verified.signer,
            },
        );
    }
    Ok(current)
}

/// Follows installs made by other gateways sharing the database: every
/// `interval`, new or changed installs are loaded and the routes rebuilt. The
/// task holds only a weak handle and ends with the gateway.
pub fn follow(packages: &Arc<Packages>, interval: std::time::Duration) {
    if interval.is_zero() {
        return;
    }
    let weak = Arc::downgrade(packages);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let Some(packages) = weak.upgrade() else { return };
            if let Err(e) = packages.sync_installs().await {
                tracing::warn!("could not follow installs from the database: {e:#}");
            }
        }
    });
}

/// Loads the adapters the configuration names by package reference
/// (`adapter = "acme/echo@1.0.0"`) that are not loaded yet. A pinned version
/// loads even if yanked (a pin is an existing use, like an install), with a
/// warning; it must be a provider adapter implementing its world.
pub async fn load_references(
    registry: &Registry,
    adapters: &Adapters,
    providers: &BTreeMap<String, ProviderConfig>,
) -> anyhow::Result<()> {
    for (id, provider) in providers {
        let Some(reference) = provider.adapter.as_deref() else {
            continue;
        };
        let Some((name, version)) = reference.split_once('@') else {
            continue;
        };
        if adapters.get(reference).is_some() {
            continue;
        }
        let context = || format!("provider '{id}': adapter '{reference}'");
        let package: PackageName = name.parse().with_context(context)?;
        let version: semver::Version = version.parse().with_context(context)?;
        anyhow::ensure!(
            reference == adapter_key(&package, &version),
            "provider '{id}': write the adapter reference as '{}'",
            adapter_key(&package, &version)
        );
        let record = registry
            .index
            .version(&package, &version)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", context()))?;
        anyhow::ensure!(
            record.manifest.kind == PackageKind::ProviderAdapter,
            "{}: the package is a {}, not a provider-adapter",
            context(),
            record.manifest.kind
        );
        if record.yanked {
            tracing::warn!(provider = %id, adapter = %reference, "the configured adapter version is yanked");
        }
        let bytes = registry
            .content(&record)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", context()))?;
        tokio::task::block_in_place(|| adapters.add(reference, &bytes)).with_context(context)?;
    }
    Ok(())
}

impl Packages {
    async fn sync_installs(&self) -> anyhow::Result<()> {
        let _serial = self.installs.serial.lock().await;
        let known = self.installs.current.lock().expect("installs lock poisoned").clone();
        let read = read_installs(&self.database, &self.registry, &self.adapters, &known).await?;
        let adapters = |installs: &BTreeMap<String, InstallRecord>| -> Vec<(String, String)> {
            installs.iter().map(|(p, i)| (p.clone(), i.adapter.clone())).collect()
        };
        if adapters(&read) == adapters(&known) {
            return Ok(());
        }
        *self.installs.current.lock().expect("installs lock poisoned") = read;
        self.routes.rebuild(&self.installs.overlay(None)).await?;
        tracing::info!("installs changed by another gateway applied");
        Ok(())
    }

    /// Binds `provider` to `package@version` for new requests. The version is
    /// vetted (manifest, signature, content) and must pass the package policy
    /// of `workspace_id`, the installing operator's, before it is compiled.
    pub async fn install(
        &self,
        workspace_id: &str,
        provider: &str,
        package: &PackageName,
        version: &semver::Version,
    ) -> Result<InstallRecord, PackageError> {
        let _serial = self.installs.serial.lock().await;
        if !self.routes.serves(provider) && !self.installs.overlay(None).contains_key(provider) {
            return Err(PackageError::ProviderNotFound(format!(
                "provider '{provider}' is not in the catalog; configure it under [providers.{provider}] first"
            )));
        }
        let record: VersionRecord = self.registry.resolve_exact(package, version).await?;
        if record.manifest.kind != PackageKind::ProviderAdapter {
            return Err(PackageError::WrongKind(format!(
                "{package}@{version} is a {}, not a provider-adapter; only provider adapters can serve a provider",
                record.manifest.kind
            )));
        }
        let verified = self.registry.verified(&record).await?;
        let policy = self
            .registry
            .index
            .package_policy(workspace_id)
            .await
            .map_err(tollgate_registry::RegistryError::from)?;
        policy.admit(package, version, verified.signer.as_ref())?;
        let bytes = verified.content;
        let key = adapter_key(package, version);
        let adapters = self.adapters.clone();
        let loaded_key = key.clone();
        tokio::task::spawn_blocking(move || adapters.add(&loaded_key, &bytes))
            .await
            .map_err(|e| PackageError::Internal(format!("adapter compilation stopped: {e}")))?
            .map_err(|e| {
                PackageError::LoadFailed(format!(
                    "{package}@{version} cannot be loaded as a provider adapter: {e:#}"
                ))
            })?;

        let now = chrono::Utc::now().timestamp_millis();
        record_install(&self.database, provider, package, version, &record.digest, now)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "install bookkeeping failed");
                PackageError::Internal("Could not record the install.".into())
            })?;

        let install = InstallRecord {
            provider: provider.to_string(),
            package: package.clone(),
            version: version.clone(),
            capabilities: Capabilities::of(&record.manifest),
            digest: record.digest,
            adapter: key,
            installed_at_ms: now,
            signature: verified.signer,
        };
        let previous = self
            .installs
            .current
            .lock()
            .expect("installs lock poisoned")
            .insert(provider.to_string(), install.clone());
        if let Err(e) = self.routes.rebuild(&self.installs.overlay(None)).await {
            // Keep serving the old routes; forget the install so both agree.
            let mut current = self.installs.current.lock().expect("installs lock poisoned");
            match previous {
                Some(previous) => current.insert(provider.to_string(), previous),
                None => current.remove(provider),
            };
            return Err(PackageError::Internal(format!("could not rebuild the routes: {e:#}")));
        }
        tracing::info!(provider, adapter = %install.adapter, "provider adapter installed");
        Ok(install)
    }
}

/// Replaces the provider's install row.
async fn record_install(
    database: &Database,
    provider: &str,
    package: &PackageName,
    version: &semver::Version,
    digest: &Digest,
    now: i64,
) -> sqlx::Result<()> {
    let mut tx = database.pool.begin().await?;
    sqlx::query("DELETE FROM registry_installs WHERE provider = $1")
        .bind(provider)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO registry_installs (provider, package, version, digest, installed_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(provider)
    .bind(package.to_string())
    .bind(version.to_string())
    .bind(digest.to_string())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}
