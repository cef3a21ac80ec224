//! The operations on a workspace's tool-server, skill, guardrail and
//! prompt-template installs:
//! `installs.create`, `.list`, `.get`, `.update`, `.delete`, and
//! `guardrails.create`, `.list`, `.delete` (installs of guardrails), over the
//! components concern's API (`tollgate_tools::Installs`). The registry
//! (`control/registry.rs`) authenticates and checks
//! `install.read`/`install.write` before these run.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_registry::{Capabilities, Signer};
use tollgate_tools::guardrails::Placement;
use tollgate_tools::{InstallChange, InstallRecord, Installs, NewCredential, NewInstall};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// Target workspace; defaults to the calling key's workspace.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// `namespace/name` of a tool-server, skill, guardrail or prompt-template package.
    pub package: String,
    /// A semver requirement (`1.2.3` means `^1.2.3`); default `*`.
    #[serde(default)]
    pub version: Option<String>,
    /// The install's name; defaults to the package's short name.
    #[serde(default)]
    pub name: Option<String>,
    /// Settings the component reads through `config`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Origins approved for outbound HTTP, e.g. `https://api.example.com`;
    /// each must be covered by the package's `allowed_hosts`.
    #[serde(default)]
    pub origins: Vec<String>,
    /// Credentials the host places on the component's requests, by name
    /// (`value`, `placement`: bearer, header:<name> or query:<name>, `origins`).
    /// Values are sealed at once and never shown.
    #[serde(default)]
    pub credentials: BTreeMap<String, NewCredential>,
    /// For a guardrail package: the routes (`chat`, `embeddings`, `actors`,
    /// `tools`), keys and models it applies to, its `order` and `mode`
    /// (`enforce` or `monitor`). Default: chat, every key and model, 0, enforce.
    #[serde(default)]
    pub guardrail: Option<Placement>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub name: String,
    /// A new semver requirement; absent: the current one, resolved again
    /// (so an update with no change upgrades to the newest match).
    #[serde(default)]
    pub version: Option<String>,
    /// Replaces the settings when given.
    #[serde(default)]
    pub config: Option<BTreeMap<String, String>>,
    /// Replaces the approved origins when given.
    #[serde(default)]
    pub origins: Option<Vec<String>>,
    /// Replaces the credentials when given.
    #[serde(default)]
    pub credentials: Option<BTreeMap<String, NewCredential>>,
    /// Replaces a guardrail's placement when given.
    #[serde(default)]
    pub guardrail: Option<Placement>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
}

/// An install as the control plane shows it.
#[derive(Serialize, JsonSchema)]
pub struct Install {
    pub name: String,
    /// `tool-server`, `skill` or `guardrail`.
    pub kind: String,
    pub package: String,
    pub requirement: String,
    pub version: String,
    pub digest: String,
    pub config: BTreeMap<String, String>,
    pub origins: Vec<String>,
    /// Dependencies pinned at install: name → {version, digest}.
    pub lock: BTreeMap<String, Pinned>,
    /// Credential names, with where they go; never their values.
    pub credentials: BTreeMap<String, CredentialShown>,
    /// The tools it offers over MCP (`<install>__<tool>`).
    pub tools: Vec<String>,
    /// A guardrail's placement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guardrail: Option<Placement>,
    /// Who signed the installed version (`null`: unsigned), checked before it ran.
    pub signature: Option<Signer>,
    /// What the package asks for; `origins` and `credentials` are what this
    /// install grants of it.
    pub capabilities: Capabilities,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

#[derive(Serialize, JsonSchema)]
pub struct Pinned {
    pub version: String,
    pub digest: String,
}

#[derive(Serialize, JsonSchema)]
pub struct CredentialShown {
    pub placement: String,
    pub origins: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct InstallList {
    pub installs: Vec<Install>,
}

#[derive(Serialize, JsonSchema)]
pub struct Uninstalled {
    pub name: String,
    pub deleted: bool,
}

pub async fn create(installs: &Installs, ctx: &Ctx, params: CreateParams) -> Result<Install, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let request = NewInstall {
        package: params.package,
        version: params.version,
        name: params.name,
        config: params.config,
        origins: params.origins,
        credentials: params.credentials,
        guardrail: params.guardrail,
    };
    let record = installs.create(workspace, request).await?;
    Ok(shown(installs, record))
}

/// `guardrails.create`: an install of a guardrail package, placed (by
/// default on chat, in `enforce` mode).
pub async fn create_guardrail(installs: &Installs, ctx: &Ctx, mut params: CreateParams) -> Result<Install, OpError> {
    params.guardrail.get_or_insert_with(Placement::default);
    create(installs, ctx, params).await
}

/// `guardrails.list`: the workspace's guardrail installs, in the order they run.
pub async fn list_guardrails(installs: &Installs, ctx: &Ctx, params: ListParams) -> Result<InstallList, OpError> {
    let mut listed = list(installs, ctx, params).await?;
    listed.installs.retain(|install| install.guardrail.is_some());
    listed
        .installs
        .sort_by_key(|install| install.guardrail.as_ref().map_or(0, |placement| placement.order));
    Ok(listed)
}

/// `guardrails.delete`: removes a guardrail install (and nothing else).
pub async fn delete_guardrail(installs: &Installs, ctx: &Ctx, params: NameParams) -> Result<Uninstalled, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let is_guardrail = installs
        .get(workspace, &params.name)
        .is_some_and(|active| active.record.guardrail.is_some());
    if !is_guardrail {
        return Err(OpError::NotFound(format!("guardrail '{}'", params.name)));
    }
    delete(installs, ctx, params).await
}

pub async fn list(installs: &Installs, ctx: &Ctx, _params: ListParams) -> Result<InstallList, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let installs = installs
        .in_workspace(workspace)
        .into_iter()
        .map(|active| shown(installs, active.record.clone()))
        .collect();
    Ok(InstallList { installs })
}

pub async fn get(installs: &Installs, ctx: &Ctx, params: NameParams) -> Result<Install, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let active = installs
        .get(workspace, &params.name)
        .ok_or_else(|| OpError::NotFound(format!("install '{}'", params.name)))?;
    Ok(shown(installs, active.record.clone()))
}

pub async fn update(installs: &Installs, ctx: &Ctx, params: UpdateParams) -> Result<Install, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let change = InstallChange {
        version: params.version,
        config: params.config,
        origins: params.origins,
        credentials: params.credentials,
        guardrail: params.guardrail,
    };
    let record = installs.update(workspace, &params.name, change).await?;
    Ok(shown(installs, record))
}

pub async fn delete(installs: &Installs, ctx: &Ctx, params: NameParams) -> Result<Uninstalled, OpError> {
    let workspace = &ctx.scope().workspace_id;
    installs.delete(workspace, &params.name).await?;
    Ok(Uninstalled {
        name: params.name,
        deleted: true,
    })
}

fn shown(installs: &Installs, record: InstallRecord) -> Install {
    let tools = tollgate_tools::calls::tools_of(installs, &record.workspace_id, &record.name);
    let vetting = installs
        .get(&record.workspace_id, &record.name)
        .map(|active| active.vetting.clone())
        .unwrap_or_default();
    Install {
        name: record.name,
        kind: record.kind,
        package: record.package,
        requirement: record.requirement,
        version: record.version,
        digest: record.digest,
        config: record.config,
        origins: record.origins,
        lock: record
            .lock
            .into_iter()
            .map(|(name, pinned)| {
                (
                    name,
                    Pinned {
                        version: pinned.version,
                        digest: pinned.digest,
                    },
                )
            })
            .collect(),
        credentials: record
            .credentials
            .into_iter()
            .map(|(name, grant)| {
                (
                    name,
                    CredentialShown {
                        placement: grant.placement,
                        origins: grant.origins,
                    },
                )
            })
            .collect(),
        tools,
        guardrail: record.guardrail,
        signature: vetting.signer,
        capabilities: vetting.capabilities,
        created_at_ms: record.created_at_ms,
        updated_at_ms: record.updated_at_ms,
    }
}
