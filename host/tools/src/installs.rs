//! Tool servers, skills, guardrails and prompt templates installed into
//! workspaces: creating, upgrading and removing installs, and the live view
//! calls read.
//!
//! The live view is one map swapped whole, so a lookup is one atomic load, an
//! upgrade is seen by the next call at once, and a call already running keeps
//! the install (and component) it started with. Components are compiled once
//! per digest and shared by every install of that version. Other gateways on
//! the same database notice a change by its revision and reload.
//!
//! The request shapes are in `requests`, what a request must satisfy in
//! `validate`, the sealing and opening of credentials in `credentials`, and
//! the live view in `live`, a prompt template's text and arguments in
//! `prompt`; this module resolves, loads and stores installs.

mod credentials;
mod live;
mod prompt;
mod requests;
mod validate;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tollgate_components::{ComponentHost, Grants, Guardrail, Skill, ToolServer};
use tollgate_core::sealed::SealingKey;
use tollgate_registry::{Capabilities, PackageKind, PackageName, Registry, RegistryError, Signer, VersionRecord};

use super::store::{InstallRecord, Pinned, Store};
use crate::remote::{NewServer, Remotes, ServerShown};
use credentials::check_credential_origins;
pub use prompt::PromptTemplate;
pub use requests::{InstallChange, NewCredential, NewInstall};
pub(crate) use validate::check_install_name;
use validate::{approve_origins, check_config};

/// Most installs one workspace may have.
pub const MAX_INSTALLS_PER_WORKSPACE: usize = 100;
/// Deepest dependency chain an install resolves.
const MAX_DEPENDENCY_DEPTH: usize = 8;

/// A compiled component (or a prompt template's text), shared by every
/// install of its digest.
#[derive(Clone)]
pub enum Loaded {
    Tool(Arc<ToolServer>),
    Skill(Arc<Skill>),
    Guardrail(Arc<Guardrail>),
    /// A `prompt-template` package: no component, served as an MCP prompt.
    Prompt(Arc<PromptTemplate>),
}

/// One live install: its record, its component and what it is granted.
pub struct Active {
    pub record: InstallRecord,
    pub component: Loaded,
    pub grants: Arc<Grants>,
    pub vetting: Vetting,
}

/// What an install shows of its package, checked before it ran: who signed
/// it (`None`: unsigned) and what it asks for.
#[derive(Clone, Debug, Default)]
pub struct Vetting {
    pub signer: Option<Signer>,
    pub capabilities: Capabilities,
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
    sealing: Arc<SealingKey>,
    /// Remote MCP servers: installs of another kind, whose names share the
    /// workspace's namespace with these.
    remotes: Remotes,
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
        let sealing = Arc::new(sealing);
        let remotes = Remotes::new(store.database().clone(), host.clone(), sealing.clone());
        let installs = Arc::new(Self {
            store,
            host,
            sealing,
            remotes,
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

    /// The workspaces' remote MCP servers.
    pub fn remotes(&self) -> &Remotes {
        &self.remotes
    }

    /// Adds a remote MCP server (`mcp_servers.create`) under a name no
    /// install has, checked under the lock installs' names are taken under.
    pub async fn create_remote(&self, workspace_id: &str, request: NewServer) -> Result<ServerShown, InstallError> {
        let _serial = self.serial.lock().await;
        if self.get(workspace_id, &request.name).is_some() {
            return Err(already_installed(&request.name));
        }
        self.remotes.create(workspace_id, request).await
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
                guardrail: None,
                revision: 0,
                created_at_ms: now,
                updated_at_ms: now,
            },
            component,
            grants: Arc::new(Grants::default()),
            vetting: Vetting {
                signer: self.registry.signer(&record).await?,
                capabilities: Capabilities::of(&record.manifest),
            },
        }))
    }
    /// An operator's gateway-wide guardrail (`[[guardrails.operator]]`):
    /// resolved, verified and loaded like an install, with its settings and
    /// no origins or credentials, and stored nowhere (the configuration is
    /// its record).
    pub async fn operator_guardrail(
        &self,
        name: &str,
        package: &str,
        requirement: Option<&str>,
        config: BTreeMap<String, String>,
    ) -> Result<Arc<Active>, InstallError> {
        let package: PackageName = package
            .parse()
            .map_err(|e| InstallError::Invalid(format!("package: {e}")))?;
        let (record, component, vetting) = self
            .prepare("", name, &package, requirement.unwrap_or("*"), config, Vec::new())
            .await?;
        if !matches!(component, Loaded::Guardrail(_)) {
            return Err(InstallError::Invalid(format!(
                "{package} is a {}, not a guardrail",
                record.kind
            )));
        }
        Ok(Arc::new(Active {
            grants: Arc::new(self.grants_of(&record)?),
            record,
            component,
            vetting,
        }))
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
        if self.get(workspace_id, &name).is_some() || self.remotes.get(workspace_id, &name).await?.is_some() {
            return Err(already_installed(&name));
        }
        let (mut record, loaded, vetting) = self
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
        record.guardrail = placement_for(&record.kind, request.guardrail)?;
        let stored = self
            .store
            .put(record, true)
            .await?
            .ok_or_else(|| already_installed(&name))?;
        self.publish(stored.clone(), loaded, vetting)?;
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
        let (mut record, loaded, vetting) = self
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
        record.guardrail = placement_for(&record.kind, change.guardrail.or_else(|| current.guardrail.clone()))?;
        let stored = self
            .store
            .put(record, false)
            .await?
            .ok_or_else(|| not_installed(name))?;
        self.publish(stored.clone(), loaded, vetting)?;
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

    /// Resolves, checks and loads an install; nothing is stored yet. The
    /// version is vetted and must pass the workspace's package policy
    /// before its component is compiled or run.
    async fn prepare(
        &self,
        workspace_id: &str,
        name: &str,
        package: &PackageName,
        requirement: &str,
        config: BTreeMap<String, String>,
        origins: Vec<String>,
    ) -> Result<(InstallRecord, Loaded, Vetting), InstallError> {
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
        if !matches!(
            kind,
            PackageKind::ToolServer | PackageKind::Skill | PackageKind::Guardrail | PackageKind::PromptTemplate
        ) {
            return Err(InstallError::Invalid(format!(
                "{package} is a {kind}; only tool servers, skills, guardrails and prompt templates install into a workspace (provider adapters are installed per provider by an operator)"
            )));
        }
        // A template sees only its arguments: a setting would go unread.
        if kind == PackageKind::PromptTemplate && !config.is_empty() {
            return Err(InstallError::Invalid(format!(
                "{package} is a prompt template, which takes no config: its arguments come with each prompts/get"
            )));
        }
        // Read and checked even when its component is compiled already, so
        // an install never succeeds over content altered in storage.
        let verified = self.registry.verified(&version).await?;
        let signer = verified.signer;
        let policy = self
            .registry
            .index
            .package_policy(workspace_id)
            .await
            .map_err(RegistryError::from)?;
        policy.admit(package, &version.version, signer.as_ref())?;
        let origins = approve_origins(&version, &origins, self.host.egress())?;
        check_config(&config)?;
        let lock = self.pin_dependencies(&version).await?;
        let loaded = self.compiled_from(&version, Some(verified.content)).await?;
        let vetting = Vetting {
            signer,
            capabilities: Capabilities::of(&version.manifest),
        };
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
            guardrail: None,
            revision: 0,
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        Ok((record, loaded, vetting))
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
        self.compiled_from(version, None).await
    }

    /// The component of `version`, compiled from `checked` (its content,
    /// already verified) or else from the registry, once per digest.
    async fn compiled_from(
        &self,
        version: &VersionRecord,
        checked: Option<bytes::Bytes>,
    ) -> Result<Loaded, InstallError> {
        let digest = version.digest.to_string();
        if let Some(loaded) = self.compiled.lock().expect("compiled lock").get(&digest) {
            return Ok(loaded.clone());
        }
        let bytes = match checked {
            Some(bytes) => bytes,
            None => self.registry.content(version).await?,
        };
        let kind = version.manifest.kind;
        let loaded = match kind {
            // Text, not a component: nothing to compile.
            PackageKind::PromptTemplate => Loaded::Prompt(Arc::new(PromptTemplate::read(version, &bytes)?)),
            _ => self.compile(version, bytes).await?,
        };
        self.compiled
            .lock()
            .expect("compiled lock")
            .insert(digest, loaded.clone());
        Ok(loaded)
    }

    /// Compiles a component off the runtime's workers.
    async fn compile(&self, version: &VersionRecord, bytes: bytes::Bytes) -> Result<Loaded, InstallError> {
        let host = self.host.clone();
        let kind = version.manifest.kind;
        let label = format!("{}@{}", version.name, version.version);
        tokio::task::spawn_blocking(move || match kind {
            PackageKind::Skill => host.load_skill(&label, &bytes).map(Loaded::Skill),
            PackageKind::Guardrail => host.load_guardrail(&label, &bytes).map(Loaded::Guardrail),
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
        })
    }
}

/// A guardrail's placement (the default when none was given); none for
/// other kinds, which may not be given one.
fn placement_for(
    kind: &str,
    placement: Option<crate::guardrails::Placement>,
) -> Result<Option<crate::guardrails::Placement>, InstallError> {
    match (kind == PackageKind::Guardrail.as_str(), placement) {
        (true, placement) => {
            let placement = placement.unwrap_or_default();
            placement.check().map_err(InstallError::Invalid)?;
            Ok(Some(placement))
        }
        (false, None) => Ok(None),
        (false, Some(_)) => Err(InstallError::Invalid(format!(
            "'guardrail' applies to guardrail installs only, and this is a {kind}"
        ))),
    }
}

pub(super) fn already_installed(name: &str) -> InstallError {
    InstallError::Conflict(format!(
        "an install named '{name}' exists in this workspace; update it, or choose another name"
    ))
}

pub(super) fn not_installed(name: &str) -> InstallError {
    InstallError::NotFound(name.to_string())
}
