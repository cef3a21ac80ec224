//! Compiling an actor on the gateway, where its registry references can be
//! resolved, and publishing it: the canonical IR becomes a registry package
//! of kind `actor` (`<namespace>/<name>`, the next patch version unless one
//! is given), recorded under its id. Sub-actors sent alongside (`files`, for
//! `path` references) are published first. Publishing content that is
//! already published answers its id and changes nothing.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path};

use serde::Serialize;
use tollgate_actors::compile::{self, CompiledTree, RefKind, RefSpec, Reference, Resolved};
use tollgate_actors::ir::{ComponentPin, Ir, PackagePin, Prompt};
use tollgate_registry::{Content, Digest, Manifest, Metadata, PackageKind, PackageName, RegistryError};

use super::store::ActorRecord;
use super::{ActorError, Actors};
use tollgate_packages::PackageError;

/// Largest YAML source (and each extra file) accepted.
const MAX_SOURCE_BYTES: usize = 256 << 10;
/// Most extra files one publish may carry.
const MAX_FILES: usize = 64;

/// An actor's YAML and the sub-actor files its `path` references name.
pub struct Sources {
    pub source: String,
    /// Relative path (as written in `path:`) → YAML.
    pub files: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PublishedActor {
    pub id: String,
    pub package: String,
    pub version: String,
    pub digest: String,
    /// False when this content was already published (nothing changed).
    pub created: bool,
}

impl Actors {
    /// Compiles `sources` against this gateway's registry and `workspace_id`'s
    /// installs.
    pub async fn compile(&self, workspace_id: &str, sources: &Sources) -> Result<CompiledTree, ActorError> {
        let _slot = self.compile_slot(workspace_id)?;
        let dir = write_sources(sources)?;
        let root = dir.path().join("actor.yaml");
        // Pass one collects what the files need from outside; the answers are
        // looked up (asynchronously) and pass two compiles with them.
        let mut wanted: Vec<Reference> = Vec::new();
        // Compiling is CPU work on tenant input: off the runtime's workers.
        let _ = tokio::task::block_in_place(|| {
            compile::compile_file(&root, &mut |reference: &Reference| {
                wanted.push(reference.clone());
                Resolved::Failed("not resolved yet".into())
            })
        });
        let mut answers: HashMap<(RefKind, String), Resolved> = HashMap::new();
        for reference in wanted {
            let key = (reference.kind, reference.spec.to_string());
            if let std::collections::hash_map::Entry::Vacant(slot) = answers.entry(key) {
                slot.insert(self.resolve_reference(workspace_id, &reference).await);
            }
        }
        tokio::task::block_in_place(|| {
            compile::compile_file(&root, &mut |reference: &Reference| {
                answers
                    .get(&(reference.kind, reference.spec.to_string()))
                    .cloned()
                    .unwrap_or_else(|| Resolved::Failed(format!("{} could not be resolved", reference.spec)))
            })
        })
        .map_err(|errors| ActorError::Invalid(errors.to_string().replace(&format!("{}/", dir.path().display()), "")))
    }

    async fn resolve_reference(&self, workspace_id: &str, reference: &Reference) -> Resolved {
        match self.try_resolve(workspace_id, reference).await {
            Ok(resolved) => resolved,
            Err(message) => Resolved::Failed(message),
        }
    }

    async fn try_resolve(&self, workspace_id: &str, reference: &Reference) -> Result<Resolved, String> {
        let registry = self.packages.registry();
        match (&reference.kind, &reference.spec) {
            (RefKind::Tool | RefKind::Skill, RefSpec::Install { name }) => {
                let active = self
                    .components
                    .installs()
                    .get(workspace_id, name)
                    .ok_or_else(|| format!("no install named '{name}' in this workspace"))?;
                let want = if reference.kind == RefKind::Tool {
                    "tool-server"
                } else {
                    "skill"
                };
                if active.record.kind != want {
                    return Err(format!(
                        "the install '{name}' is a {}, not a {want}",
                        active.record.kind
                    ));
                }
                Ok(Resolved::Component(ComponentPin {
                    package: PackagePin {
                        name: active.record.package.clone(),
                        version: active.record.version.clone(),
                        digest: active.record.digest.clone(),
                    },
                    install: Some(name.clone()),
                }))
            }
            (kind, RefSpec::Package { name, range }) => {
                let package: PackageName = name.parse().map_err(|e: tollgate_registry::NameError| e.to_string())?;
                // Another workspace's private package cannot be pulled in by
                // reference (its content would land in this actor's IR).
                let readable = registry
                    .index
                    .readable_by(&package, Some(workspace_id))
                    .await
                    .map_err(|e| e.to_string())?;
                if !readable {
                    return Err(format!("package {package} not found"));
                }
                let requirement =
                    semver::VersionReq::parse(range).map_err(|e| format!("'{range}' is not a semver range: {e}"))?;
                let record = registry
                    .resolve(&package, &requirement)
                    .await
                    .map_err(|e| e.to_string())?;
                let expected = match kind {
                    RefKind::Tool => PackageKind::ToolServer,
                    RefKind::Skill => PackageKind::Skill,
                    RefKind::Prompt => PackageKind::PromptTemplate,
                    RefKind::Actor => PackageKind::Actor,
                };
                if record.manifest.kind != expected {
                    return Err(format!("{name} is a {}, not a {expected}", record.manifest.kind));
                }
                let pin = PackagePin {
                    name: name.clone(),
                    version: record.version.to_string(),
                    digest: record.digest.to_string(),
                };
                match kind {
                    RefKind::Tool | RefKind::Skill => Ok(Resolved::Component(ComponentPin {
                        package: pin,
                        install: None,
                    })),
                    RefKind::Prompt => {
                        let bytes = registry.content(&record).await.map_err(|e| e.to_string())?;
                        let source = String::from_utf8(bytes.to_vec())
                            .map_err(|_| format!("{name}@{} is not UTF-8 text", record.version))?;
                        Ok(Resolved::Prompt(Prompt {
                            source,
                            package: Some(pin),
                        }))
                    }
                    RefKind::Actor => {
                        let bytes = registry.content(&record).await.map_err(|e| e.to_string())?;
                        let ir: Ir = serde_json::from_slice(&bytes)
                            .map_err(|e| format!("{name}@{} is not an actor IR: {e}", record.version))?;
                        let (_, id) = ir.identify().map_err(|e| e.to_string())?;
                        Ok(Resolved::Actor { id, ir: Box::new(ir) })
                    }
                }
            }
            (RefKind::Actor, RefSpec::Id { id }) => {
                let ir = self.ir(id).await.map_err(|e| e.to_string())?;
                Ok(Resolved::Actor {
                    id: id.clone(),
                    ir: Box::new((*ir).clone()),
                })
            }
            (_, spec) => Err(format!("{spec} cannot be resolved on the gateway")),
        }
    }

    /// Whether the actor's package is public (anyone may read its IR and its
    /// deployments' cards). An unknown actor is not.
    pub async fn is_public(&self, actor_id: &str) -> bool {
        let Ok(Some(record)) = self.store.actor(actor_id).await else {
            return false;
        };
        let Ok(package) = record.package.parse::<PackageName>() else {
            return false;
        };
        let index = &self.packages.registry().index;
        index.readable_by(&package, None).await.unwrap_or(false)
    }

    /// Compiles and publishes `sources` (sub-actors first); answers the root.
    pub async fn publish(
        &self,
        workspace_id: &str,
        publisher: &str,
        sources: &Sources,
        version: Option<semver::Version>,
        license: &str,
    ) -> Result<PublishedActor, ActorError> {
        let tree = self.compile(workspace_id, sources).await?;
        for child in &tree.children {
            self.publish_one(workspace_id, publisher, child, None, license).await?;
        }
        self.publish_one(workspace_id, publisher, &tree.root, version, license)
            .await
    }

    async fn publish_one(
        &self,
        workspace_id: &str,
        publisher: &str,
        compiled: &compile::Compiled,
        version: Option<semver::Version>,
        license: &str,
    ) -> Result<PublishedActor, ActorError> {
        let id = compiled.id.to_string();
        if let Some(existing) = self.store.actor(&id).await? {
            return Ok(shown(&existing, false));
        }
        let metadata = &compiled.ir.metadata;
        let name: PackageName = format!("{}/{}", metadata.namespace, metadata.name)
            .parse()
            .map_err(|e: tollgate_registry::NameError| ActorError::Invalid(e.to_string()))?;
        let registry = self.packages.registry();
        // Two publishes racing for the next version: the loser takes the one after.
        for _ in 0..3 {
            let chosen = match &version {
                Some(version) => version.clone(),
                None => next_version(registry, &name).await?,
            };
            let manifest = Manifest {
                schema_version: tollgate_registry::manifest::SCHEMA_VERSION,
                kind: PackageKind::Actor,
                name: name.clone(),
                version: chosen,
                description: metadata.description.chars().take(1024).collect(),
                license: license.to_string(),
                content: Content {
                    digest: Digest::of(&compiled.canonical),
                    size: compiled.canonical.len() as u64,
                    media_type: "application/json".into(),
                },
                dependencies: BTreeMap::new(),
                metadata: Metadata::default(),
            };
            let published = self
                .packages
                .publish_with_content(
                    workspace_id,
                    publisher,
                    &manifest,
                    compiled.canonical.clone().into(),
                    None,
                )
                .await;
            match published {
                Ok(published) => {
                    let record = ActorRecord {
                        id: id.clone(),
                        workspace_id: workspace_id.to_string(),
                        package: name.to_string(),
                        version: published.version.to_string(),
                        digest: published.digest.to_string(),
                        ir: String::from_utf8(compiled.canonical.clone()).expect("canonical JSON is UTF-8"),
                        created_at_ms: tollgate_core::db::now_ms(),
                    };
                    self.store.insert_actor(&record).await?;
                    return Ok(shown(&record, true));
                }
                Err(PackageError::Registry(RegistryError::Conflict(message))) => {
                    if version.is_some() {
                        return Err(ActorError::Invalid(message));
                    }
                }
                Err(error) => return Err(package_error(error)),
            }
        }
        Err(ActorError::Internal(anyhow::anyhow!(
            "could not pick a free version for {name}"
        )))
    }
}

fn shown(record: &ActorRecord, created: bool) -> PublishedActor {
    PublishedActor {
        id: record.id.clone(),
        package: record.package.clone(),
        version: record.version.clone(),
        digest: record.digest.clone(),
        created,
    }
}

/// A publish the registry refused is the caller's to fix (`Invalid`), but a
/// registry that could not store it (its database or blob store) is the
/// gateway's (`Internal`), so the caller is not told its actor is wrong.
fn package_error(error: PackageError) -> ActorError {
    match error {
        PackageError::Forbidden(message) => ActorError::Forbidden(message),
        PackageError::Registry(RegistryError::Storage(message)) | PackageError::Internal(message) => {
            ActorError::Internal(anyhow::anyhow!("publishing the actor: {message}"))
        }
        other => ActorError::Invalid(other.to_string()),
    }
}

/// One patch above the newest published version, or 0.1.0.
async fn next_version(
    registry: &tollgate_registry::Registry,
    name: &PackageName,
) -> Result<semver::Version, ActorError> {
    let versions = match registry.index.versions(name).await {
        Ok(versions) => versions,
        Err(tollgate_registry::index::IndexError::NotFound(_)) => Vec::new(),
        Err(e) => return Err(ActorError::Internal(anyhow::anyhow!("reading {name}'s versions: {e}"))),
    };
    Ok(match versions.iter().map(|v| &v.version).max() {
        Some(newest) => semver::Version::new(newest.major, newest.minor, newest.patch + 1),
        None => semver::Version::new(0, 1, 0),
    })
}

/// Lays the sources out as files so the compiler resolves `path`
/// references exactly as it does on a developer's disk. Paths must stay
/// inside the directory.
fn write_sources(sources: &Sources) -> Result<tempfile::TempDir, ActorError> {
    if sources.source.len() > MAX_SOURCE_BYTES {
        return Err(ActorError::Invalid(format!(
            "source is larger than {MAX_SOURCE_BYTES} bytes"
        )));
    }
    if sources.files.len() > MAX_FILES {
        return Err(ActorError::Invalid(format!("at most {MAX_FILES} files may be sent")));
    }
    let dir = tempfile::tempdir().map_err(|e| ActorError::Internal(e.into()))?;
    std::fs::write(dir.path().join("actor.yaml"), &sources.source).map_err(|e| ActorError::Internal(e.into()))?;
    for (name, text) in &sources.files {
        let relative = Path::new(name);
        let inside = relative
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside || name.is_empty() {
            return Err(ActorError::Invalid(format!(
                "files: '{name}' must be a relative path inside the actor's directory"
            )));
        }
        if text.len() > MAX_SOURCE_BYTES {
            return Err(ActorError::Invalid(format!(
                "files: '{name}' is larger than {MAX_SOURCE_BYTES} bytes"
            )));
        }
        let path = dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ActorError::Internal(e.into()))?;
        }
        std::fs::write(&path, text).map_err(|e| ActorError::Internal(e.into()))?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_that_cannot_store_is_the_gateways_error_not_the_callers() {
        let storage = PackageError::Registry(RegistryError::Storage("database is locked".into()));
        assert!(matches!(package_error(storage), ActorError::Internal(_)));
        let conflict = PackageError::Registry(RegistryError::Conflict("acme/x@1.0.0 exists".into()));
        assert!(matches!(package_error(conflict), ActorError::Invalid(_)));
        let forbidden = PackageError::Forbidden("not your namespace".into());
        assert!(matches!(package_error(forbidden), ActorError::Forbidden(_)));
    }
}
