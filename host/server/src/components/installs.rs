//! Tool servers and skills installed into workspaces: creating, upgrading and
//! removing installs, and the live view calls read.
//!
//! The live view is one map swapped whole, so a lookup is one atomic load, an
//! upgrade is seen by the next call at once, and a call already running keeps
//! the install (and component) it started with. Components are compiled once
//! per digest and shared by every install of that version. Other gateways on
//! the same database notice a change by its revision and reload.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tollgate_components::{ComponentHost, Credential, Egress, Grants, Origin, Placement, Skill, ToolServer};
use tollgate_core::sealed::SealingKey;
use tollgate_core::secret::Secret;
use tollgate_registry::{PackageKind, PackageName, Registry, RegistryError, VersionRecord};

use super::store::{CredentialGrant, InstallRecord, Pinned, Store};

/// Most installs one workspace may have.
pub const MAX_INSTALLS_PER_WORKSPACE: usize = 100;
/// Deepest dependency chain an install resolves.
const MAX_DEPENDENCY_DEPTH: usize = 8;

/// A compiled component, shared by every install of its digest.
#[derive(Clone)]
pub enum Loaded {
    Tool(Arc<ToolServer>),
    Skill(Arc<Skill>),
}

/// One live install: its record, its component and what it is granted.
pub struct Active {
    pub record: InstallRecord,
    pub component: Loaded,
    pub grants: Arc<Grants>,
}

/// What `installs.create` asks for.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewInstall {
    pub package: String,
    /// A semver requirement (`1.2.3` means `^1.2.3`); the newest match that is not yanked.
    #[serde(default)]
    pub version: Option<String>,
    /// Defaults to the package's short name.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Origins approved for outbound HTTP; each must be covered by the
    /// package's `allowed_hosts`.
    #[serde(default)]
    pub origins: Vec<String>,
    /// Credentials the host places on the component's requests, by name.
    #[serde(default)]
    pub credentials: BTreeMap<String, NewCredential>,
}

/// A credential as given at install: its value is sealed at once and never
/// shown again.
#[derive(Clone, Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCredential {
    pub value: String,
    /// `bearer` (default), `header:<name>` or `query:<name>`.
    #[serde(default = "bearer")]
    pub placement: String,
    /// The origins it may be sent to; each one of the install's origins.
    /// Default: all of them.
    #[serde(default)]
    pub origins: Option<Vec<String>>,
}

fn bearer() -> String {
    "bearer".into()
}

/// What `installs.update` changes; absent fields stay as they are. The
/// version requirement is resolved again, so an update with none upgrades to
/// the newest match.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallChange {
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub config: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub origins: Option<Vec<String>>,
    /// Replaces the credentials when given.
    #[serde(default)]
    pub credentials: Option<BTreeMap<String, NewCredential>>,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{0}")]
    Invalid(String),
    /// No install of this name in the workspace.
    #[error("no install named '{0}' in this workspace")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    QuotaExceeded(String),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The component would not load (not a component of its kind, a trap
    /// while listing its tools).
    #[error("{0}")]
    Load(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

type Key = (String, String);

pub struct Installs {
    store: Store,
    host: ComponentHost,
    /// Seals credential values in the store, and opens them to build grants.
    sealing: SealingKey,
    registry: Registry,
    compiled: Mutex<HashMap<String, Loaded>>,
    live: ArcSwap<BTreeMap<Key, Arc<Active>>>,
    revision: AtomicI64,
    /// One change at a time on this gateway, so two never race on the view.
    serial: tokio::sync::Mutex<()>,
}

impl Installs {
    /// Loads every recorded install. One that no longer loads is logged and
    /// left out, so one bad component cannot stop the gateway.
    pub async fn load(
        store: Store,
        host: ComponentHost,
        registry: Registry,
        sealing: SealingKey,
    ) -> anyhow::Result<Arc<Self>> {
        let installs = Arc::new(Self {
            store,
            host,
            sealing,
            registry,
            compiled: Mutex::new(HashMap::new()),
            live: ArcSwap::from_pointee(BTreeMap::new()),
            revision: AtomicI64::new(-1),
            serial: tokio::sync::Mutex::new(()),
        });
        installs.refresh().await?;
        Ok(installs)
    }

    pub fn host(&self) -> &ComponentHost {
        &self.host
    }

    /// A registry component a hosted actor pins by version and digest, run
    /// without an install: no origins, no credentials, no settings. The
    /// stored content must still hash to the pinned digest.
    pub async fn pinned(&self, package: &str, version: &str, digest: &str) -> Result<Arc<Active>, InstallError> {
        let name: PackageName = package
            .parse()
            .map_err(|e| InstallError::Invalid(format!("package: {e}")))?;
        let version_number =
            semver::Version::parse(version).map_err(|e| InstallError::Invalid(format!("version '{version}': {e}")))?;
        let record = self
            .registry
            .index
            .version(&name, &version_number)
            .await
            .map_err(RegistryError::from)?;
        if record.digest.to_string() != digest {
            return Err(InstallError::Conflict(format!(
                "{package}@{version} has digest {}, but the actor pins {digest}",
                record.digest
            )));
        }
        let kind = record.manifest.kind;
        let component = self.compiled(&record).await?;
        let now = tollgate_core::db::now_ms();
        Ok(Arc::new(Active {
            record: InstallRecord {
                workspace_id: String::new(),
                name: name.name().to_string(),
                kind: kind.as_str().to_string(),
                package: package.to_string(),
                requirement: format!("={version}"),
                version: version.to_string(),
                digest: digest.to_string(),
                config: BTreeMap::new(),
                origins: Vec::new(),
                lock: BTreeMap::new(),
                credentials: BTreeMap::new(),
                sealed_credentials: String::new(),
                revision: 0,
                created_at_ms: now,
                updated_at_ms: now,
            },
            component,
            grants: Arc::new(Grants::default()),
        }))
    }

    pub fn get(&self, workspace_id: &str, name: &str) -> Option<Arc<Active>> {
        self.live
            .load()
            .get(&(workspace_id.to_string(), name.to_string()))
            .cloned()
    }

    /// The workspace's installs, by name.
    pub fn in_workspace(&self, workspace_id: &str) -> Vec<Arc<Active>> {
        let live = self.live.load();
        live.range((workspace_id.to_string(), String::new())..)
            .take_while(|((workspace, _), _)| workspace == workspace_id)
            .map(|(_, active)| active.clone())
            .collect()
    }

    pub async fn create(&self, workspace_id: &str, request: NewInstall) -> Result<InstallRecord, InstallError> {
        let package: PackageName = request
            .package
            .parse()
            .map_err(|e| InstallError::Invalid(format!("package: {e}")))?;
        let name = request.name.clone().unwrap_or_else(|| package.name().to_string());
        check_install_name(&name)?;
        let requirement = request.version.clone().unwrap_or_else(|| "*".into());
        let _serial = self.serial.lock().await;
        if self.in_workspace(workspace_id).len() >= MAX_INSTALLS_PER_WORKSPACE {
            return Err(InstallError::QuotaExceeded(format!(
                "a workspace may have at most {MAX_INSTALLS_PER_WORKSPACE} installs"
            )));
        }
        if self.get(workspace_id, &name).is_some() {
            return Err(already_installed(&name));
        }
        let (mut record, loaded) = self
            .prepare(
                workspace_id,
                &name,
                &package,
                &requirement,
                request.config,
                request.origins,
            )
            .await?;
        self.grant_credentials(&mut record, request.credentials)?;
        let stored = self
            .store
            .put(record, true)
            .await?
            .ok_or_else(|| already_installed(&name))?;
        self.publish(stored.clone(), loaded)?;
        Ok(stored)
    }

    pub async fn update(
        &self,
        workspace_id: &str,
        name: &str,
        change: InstallChange,
    ) -> Result<InstallRecord, InstallError> {
        let _serial = self.serial.lock().await;
        let current = self.get(workspace_id, name).ok_or_else(|| not_installed(name))?;
        let current = &current.record;
        let package: PackageName = current
            .package
            .parse()
            .map_err(|e| InstallError::Internal(anyhow::anyhow!("stored package name: {e}")))?;
        let requirement = change.version.unwrap_or_else(|| current.requirement.clone());
        let config = change.config.unwrap_or_else(|| current.config.clone());
        let origins = change.origins.unwrap_or_else(|| current.origins.clone());
        let (mut record, loaded) = self
            .prepare(workspace_id, name, &package, &requirement, config, origins)
            .await?;
        match change.credentials {
            Some(credentials) => self.grant_credentials(&mut record, credentials)?,
            None => {
                record.credentials = current.credentials.clone();
                record.sealed_credentials = current.sealed_credentials.clone();
                check_credential_origins(&record)?;
            }
        }
        let stored = self
            .store
            .put(record, false)
            .await?
            .ok_or_else(|| not_installed(name))?;
        self.publish(stored.clone(), loaded)?;
        Ok(stored)
    }

    /// Removes the install; its tools disappear from the next lookup.
    pub async fn delete(&self, workspace_id: &str, name: &str) -> Result<(), InstallError> {
        let _serial = self.serial.lock().await;
        if !self.store.delete(workspace_id, name).await? {
            return Err(not_installed(name));
        }
        let key = (workspace_id.to_string(), name.to_string());
        self.live.rcu(|live| {
            let mut next = BTreeMap::clone(live);
            next.remove(&key);
            next
        });
        Ok(())
    }

    /// Resolves, checks and loads an install; nothing is stored yet.
    async fn prepare(
        &self,
        workspace_id: &str,
        name: &str,
        package: &PackageName,
        requirement: &str,
        config: BTreeMap<String, String>,
        origins: Vec<String>,
    ) -> Result<(InstallRecord, Loaded), InstallError> {
        let parsed: semver::VersionReq = requirement
            .parse()
            .map_err(|e| InstallError::Invalid(format!("version '{requirement}' is not a semver requirement: {e}")))?;
        // Another workspace's private package is missing here, as in the registry.
        if !self
            .registry
            .index
            .readable_by(package, Some(workspace_id))
            .await
            .map_err(RegistryError::from)?
        {
            return Err(RegistryError::NotFound(format!("package {package} not found")).into());
        }
        let version = self.registry.resolve(package, &parsed).await?;
        let kind = version.manifest.kind;
        if !matches!(kind, PackageKind::ToolServer | PackageKind::Skill) {
            return Err(InstallError::Invalid(format!(
                "{package} is a {kind}; only tool servers and skills install into a workspace (provider adapters are installed per provider by an operator)"
            )));
        }
        let origins = approve_origins(&version, &origins, self.host.egress())?;
        check_config(&config)?;
        let lock = self.pin_dependencies(&version).await?;
        let loaded = self.compiled(&version).await?;
        let record = InstallRecord {
            workspace_id: workspace_id.to_string(),
            name: name.to_string(),
            kind: kind.as_str().to_string(),
            package: package.to_string(),
            requirement: requirement.to_string(),
            version: version.version.to_string(),
            digest: version.digest.to_string(),
            config,
            origins: origins.iter().map(|o| o.to_string()).collect(),
            lock,
            credentials: BTreeMap::new(),
            sealed_credentials: String::new(),
            revision: 0,
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        Ok((record, loaded))
    }

    /// Resolves the manifest's dependencies (and theirs), pinning each to a
    /// version and digest. Two different requirements on one package must
    /// agree on the version they resolve to.
    async fn pin_dependencies(&self, root: &VersionRecord) -> Result<BTreeMap<String, Pinned>, InstallError> {
        let mut lock: BTreeMap<String, Pinned> = BTreeMap::new();
        let mut pending: Vec<(VersionRecord, usize)> = vec![(root.clone(), 0)];
        while let Some((record, depth)) = pending.pop() {
            for (dependency, requirement) in &record.manifest.dependencies {
                if depth >= MAX_DEPENDENCY_DEPTH {
                    return Err(InstallError::Invalid(format!(
                        "dependencies nest deeper than {MAX_DEPENDENCY_DEPTH} levels"
                    )));
                }
                let resolved = self.registry.resolve(dependency, requirement).await?;
                let pinned = Pinned {
                    version: resolved.version.to_string(),
                    digest: resolved.digest.to_string(),
                };
                match lock.get(&dependency.to_string()) {
                    Some(existing) if *existing == pinned => continue,
                    Some(existing) => {
                        return Err(InstallError::Invalid(format!(
                            "{dependency} is needed as {} and as {}; they must agree",
                            existing.version, pinned.version
                        )));
                    }
                    None => {
                        lock.insert(dependency.to_string(), pinned);
                        pending.push((resolved, depth + 1));
                    }
                }
            }
        }
        Ok(lock)
    }

    /// The component of `version`, compiled once per digest.
    async fn compiled(&self, version: &VersionRecord) -> Result<Loaded, InstallError> {
        let digest = version.digest.to_string();
        if let Some(loaded) = self.compiled.lock().expect("compiled lock").get(&digest) {
            return Ok(loaded.clone());
        }
        let bytes = self.registry.content(version).await?;
        let host = self.host.clone();
        let kind = version.manifest.kind;
        let label = format!("{}@{}", version.name, version.version);
        let loaded = tokio::task::spawn_blocking(move || match kind {
            PackageKind::Skill => host.load_skill(&label, &bytes).map(Loaded::Skill),
            _ => host.load_tool_server(&label, &bytes).map(Loaded::Tool),
        })
        .await
        .map_err(|e| InstallError::Internal(anyhow::anyhow!("loading the component: {e}")))?
        .map_err(|e| {
            InstallError::Load(format!(
                "{}@{} does not load: {}",
                version.name,
                version.version,
                tollgate_core::error_text::error_chain(e.as_ref())
            ))
        })?;
        self.compiled
            .lock()
            .expect("compiled lock")
            .insert(digest, loaded.clone());
        Ok(loaded)
    }

    /// Puts a stored record live.
    fn publish(&self, record: InstallRecord, component: Loaded) -> Result<(), InstallError> {
        let active = Arc::new(Active {
            grants: Arc::new(self.grants_of(&record)?),
            record,
            component,
        });
        let key = (active.record.workspace_id.clone(), active.record.name.clone());
        self.live.rcu(|live| {
            let mut next = BTreeMap::clone(live);
            next.insert(key.clone(), active.clone());
            next
        });
        Ok(())
    }

    /// Checks `credentials` against the install and seals their values into
    /// `record` (names, placement and origins stay readable).
    fn grant_credentials(
        &self,
        record: &mut InstallRecord,
        credentials: BTreeMap<String, NewCredential>,
    ) -> Result<(), InstallError> {
        if credentials.len() > 16 {
            return Err(InstallError::Invalid(
                "an install may have at most 16 credentials".into(),
            ));
        }
        let mut values = BTreeMap::new();
        record.credentials.clear();
        for (name, credential) in credentials {
            let valid_name = (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid_name {
                return Err(InstallError::Invalid(format!(
                    "credential name '{name}' must be 1-64 letters, digits, '-' or '_'"
                )));
            }
            if credential.value.is_empty() || credential.value.len() > 4096 {
                return Err(InstallError::Invalid(format!(
                    "credential '{name}': the value must be 1-4096 bytes"
                )));
            }
            parse_placement(&credential.placement).map_err(InstallError::Invalid)?;
            let origins = match credential.origins {
                Some(origins) => origins
                    .iter()
                    .map(|o| Origin::parse(o).map(|o| o.to_string()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(InstallError::Invalid)?,
                None => record.origins.clone(),
            };
            record.credentials.insert(
                name.clone(),
                CredentialGrant {
                    placement: credential.placement,
                    origins,
                },
            );
            values.insert(name, credential.value);
        }
        check_credential_origins(record)?;
        record.sealed_credentials = match values.is_empty() {
            true => String::new(),
            false => {
                let plaintext = serde_json::to_vec(&values).map_err(|e| InstallError::Internal(e.into()))?;
                self.sealing.seal(&plaintext, &sealing_context(record))
            }
        };
        Ok(())
    }

    /// What the install may use: its origins, its settings, and its
    /// credentials, opened from the store.
    fn grants_of(&self, record: &InstallRecord) -> Result<Grants, InstallError> {
        let origins = record
            .origins
            .iter()
            .map(|o| Origin::parse(o))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| InstallError::Internal(anyhow::anyhow!("stored origin: {e}")))?;
        let mut credentials = BTreeMap::new();
        if !record.sealed_credentials.is_empty() {
            let opened = self
                .sealing
                .open(&record.sealed_credentials, &sealing_context(record))
                .map_err(InstallError::Internal)?;
            let mut values: BTreeMap<String, String> =
                serde_json::from_slice(&opened).map_err(|e| InstallError::Internal(e.into()))?;
            for (name, grant) in &record.credentials {
                let (Some(value), Ok(placement)) = (values.remove(name), parse_placement(&grant.placement)) else {
                    continue;
                };
                let origins = grant.origins.iter().filter_map(|o| Origin::parse(o).ok()).collect();
                credentials.insert(
                    name.clone(),
                    Credential {
                        value: Secret::new(value),
                        placement,
                        origins,
                    },
                );
            }
        }
        Ok(Grants {
            origins,
            credentials,
            config: record.config.clone(),
        })
    }

    /// Reloads every install when another gateway (or this one) changed any.
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let revision = self.store.revision().await?;
        if revision == self.revision.load(Ordering::Acquire) {
            return Ok(());
        }
        let _serial = self.serial.lock().await;
        let mut next = BTreeMap::new();
        for record in self.store.all().await? {
            match self.activate(record.clone()).await {
                Ok(active) => {
                    next.insert((record.workspace_id.clone(), record.name.clone()), active);
                }
                Err(e) => tracing::error!(
                    workspace = %record.workspace_id,
                    install = %record.name,
                    error = %e,
                    "an install no longer loads; its tools are unavailable"
                ),
            }
        }
        self.live.store(Arc::new(next));
        self.revision.store(revision, Ordering::Release);
        Ok(())
    }

    async fn activate(&self, record: InstallRecord) -> Result<Arc<Active>, InstallError> {
        if let Some(current) = self.get(&record.workspace_id, &record.name)
            && current.record.revision == record.revision
        {
            return Ok(current);
        }
        let package: PackageName = record
            .package
            .parse()
            .map_err(|e| InstallError::Internal(anyhow::anyhow!("stored package name: {e}")))?;
        let version: semver::Version = record
            .version
            .parse()
            .map_err(|e| InstallError::Internal(anyhow::anyhow!("stored version: {e}")))?;
        // A version yanked since it was installed keeps serving its installs.
        let version = self
            .registry
            .index
            .version(&package, &version)
            .await
            .map_err(RegistryError::from)?;
        let component = self.compiled(&version).await?;
        Ok(Arc::new(Active {
            grants: Arc::new(self.grants_of(&record)?),
            record,
            component,
        }))
    }

    /// Follows changes made by other gateways, every `every`.
    pub fn follow(self: &Arc<Self>, every: Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(installs) = weak.upgrade() else { return };
                if let Err(e) = installs.refresh().await {
                    tracing::warn!(error = %e, "could not refresh component installs");
                }
            }
        });
    }
}

/// Install names become MCP tool-name prefixes (`<install>__<tool>`) and URL
/// path segments: lowercase letters, digits and single `-`.
fn check_install_name(name: &str) -> Result<(), InstallError> {
    let ok = (1..=48).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(InstallError::Invalid(format!(
            "install name '{name}' must be 1-48 lowercase letters, digits and single '-'"
        )))
    }
}

fn check_config(config: &BTreeMap<String, String>) -> Result<(), InstallError> {
    if config.len() > 64 {
        return Err(InstallError::Invalid("config may have at most 64 settings".into()));
    }
    if let Some((key, _)) = config
        .iter()
        .find(|(k, v)| k.is_empty() || k.len() > 64 || v.len() > 4096)
    {
        return Err(InstallError::Invalid(format!(
            "config setting '{key}': keys are 1-64 bytes and values at most 4096"
        )));
    }
    Ok(())
}

/// The approved origins, each covered by the manifest's `allowed_hosts`, and
/// none internal unless the operator allowed it.
fn approve_origins(version: &VersionRecord, origins: &[String], egress: &Egress) -> Result<Vec<Origin>, InstallError> {
    let allowed = &version.manifest.metadata.allowed_hosts;
    let mut approved = Vec::new();
    for text in origins {
        let origin = Origin::parse(text).map_err(InstallError::Invalid)?;
        if !allowed.iter().any(|pattern| origin.matches(pattern)) {
            return Err(InstallError::Invalid(format!(
                "origin {origin} is not among the hosts {}@{} may call ({})",
                version.name,
                version.version,
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            )));
        }
        egress.check_origin(&origin).map_err(InstallError::Invalid)?;
        if !approved.contains(&origin) {
            approved.push(origin);
        }
    }
    Ok(approved)
}

/// Each credential's origins must be among the install's.
fn check_credential_origins(record: &InstallRecord) -> Result<(), InstallError> {
    for (name, grant) in &record.credentials {
        if let Some(origin) = grant.origins.iter().find(|o| !record.origins.contains(o)) {
            return Err(InstallError::Invalid(format!(
                "credential '{name}' names origin {origin}, which is not one of the install's origins"
            )));
        }
    }
    Ok(())
}

fn parse_placement(text: &str) -> Result<Placement, String> {
    let valid_name = |name: &str| {
        !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    match text.split_once(':') {
        None if text == "bearer" => Ok(Placement::Bearer),
        Some(("header", name))
            if valid_name(name) && !["host", "content-length"].contains(&name.to_ascii_lowercase().as_str()) =>
        {
            Ok(Placement::Header(name.to_ascii_lowercase()))
        }
        Some(("query", name)) if valid_name(name) => Ok(Placement::Query(name.to_string())),
        _ => Err(format!(
            "placement '{text}' must be bearer, header:<name> or query:<name>"
        )),
    }
}

/// What a sealed credential set is bound to: its workspace and install name.
fn sealing_context(record: &InstallRecord) -> Vec<u8> {
    format!("component-install\0{}\0{}", record.workspace_id, record.name).into_bytes()
}

fn already_installed(name: &str) -> InstallError {
    InstallError::Conflict(format!(
        "an install named '{name}' exists in this workspace; update it, or choose another name"
    ))
}

fn not_installed(name: &str) -> InstallError {
    InstallError::NotFound(name.to_string())
}
