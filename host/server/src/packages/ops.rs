//! The registry as control-plane operations (`packages.*`, `installs.*`), so A2A
//! clients can search, yank, deprecate and install. They apply the same checks
//! as the HTTP API (`api.rs`), whose errors they translate. Publishing uploads
//! content and stays on HTTP.
//!
//! Registered in `control/registry.rs`; the control-plane contract test runs each.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_registry::{PackageKind, PackageName};

use super::api::{check_namespace, check_operator, registry_error};
use crate::control::error::OpError;
use crate::control::registry::Ctx;
use crate::error::ApiError;

fn op_error(error: ApiError) -> OpError {
    match error.status.as_u16() {
        400 => OpError::InvalidParams(error.message),
        401 => OpError::Unauthenticated,
        403 => OpError::PermissionDenied(error.message),
        // NotFound names the missing thing; the registry's message already says "not found".
        404 => OpError::NotFound(error.message.trim_end_matches(" not found").to_string()),
        409 if error.code == "version_exists" => OpError::AlreadyExists(error.message),
        409 => OpError::FailedPrecondition(error.message),
        _ => OpError::Internal(anyhow::anyhow!(error.message)),
    }
}

fn package_name(text: &str) -> Result<PackageName, OpError> {
    text.parse().map_err(|e| OpError::InvalidParams(format!("name: {e}")))
}

fn version(text: &str) -> Result<semver::Version, OpError> {
    text.parse()
        .map_err(|e| OpError::InvalidParams(format!("version '{text}' is not semver: {e}")))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// provider-adapter, tool-server, skill, actor, prompt-template or graph.
    #[serde(default)]
    pub kind: Option<String>,
    /// Text to find in names and descriptions (any case).
    #[serde(default)]
    pub q: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
pub struct PackageEntry {
    pub name: String,
    pub kind: String,
    pub description: String,
    /// Newest version that is not yanked.
    pub latest: Option<String>,
    pub updated_at_ms: i64,
}

#[derive(Serialize, JsonSchema)]
pub struct PackageList {
    pub packages: Vec<PackageEntry>,
}

pub async fn search(ctx: &Ctx, params: SearchParams) -> Result<PackageList, OpError> {
    let kind = params
        .kind
        .as_deref()
        .map(str::parse::<PackageKind>)
        .transpose()
        .map_err(OpError::InvalidParams)?;
    let found = ctx
        .gateway
        .registry
        .search(kind, params.q.as_deref(), params.limit.unwrap_or(50))
        .await
        .map_err(|e| op_error(registry_error(e)))?;
    Ok(PackageList {
        packages: found
            .into_iter()
            .map(|p| PackageEntry {
                name: p.name.to_string(),
                kind: p.kind.to_string(),
                description: p.description,
                latest: p.latest.map(|v| v.to_string()),
                updated_at_ms: p.updated_at_ms,
            })
            .collect(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageParams {
    /// `namespace/name`.
    pub name: String,
}

#[derive(Serialize, JsonSchema)]
pub struct VersionEntry {
    pub version: String,
    pub digest: String,
    pub size: u64,
    pub yanked: bool,
    pub deprecated: Option<String>,
    pub published_at_ms: i64,
}

#[derive(Serialize, JsonSchema)]
pub struct PackageInfo {
    pub name: String,
    pub kind: String,
    pub description: String,
    /// Newest first.
    pub versions: Vec<VersionEntry>,
}

pub async fn get(ctx: &Ctx, params: PackageParams) -> Result<PackageInfo, OpError> {
    let name = package_name(&params.name)?;
    let versions = ctx
        .gateway
        .registry
        .index
        .versions(&name)
        .await
        .map_err(|e| op_error(registry_error(e.into())))?;
    let newest = &versions[0].manifest;
    Ok(PackageInfo {
        name: name.to_string(),
        kind: newest.kind.to_string(),
        description: newest.description.clone(),
        versions: versions
            .iter()
            .map(|v| VersionEntry {
                version: v.version.to_string(),
                digest: v.digest.to_string(),
                size: v.size,
                yanked: v.yanked,
                deprecated: v.deprecated.clone(),
                published_at_ms: v.published_at_ms,
            })
            .collect(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionParams {
    /// The publishing workspace (default: the key's).
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub name: String,
    pub version: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeprecateParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub name: String,
    pub version: String,
    /// Why, and what to use instead; `null` lifts the deprecation.
    pub message: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct VersionState {
    pub name: String,
    pub version: String,
    pub yanked: bool,
    pub deprecated: Option<String>,
}

/// The version after a change made by a workspace that may publish in its namespace.
async fn change(
    ctx: &Ctx,
    name: &str,
    text: &str,
    apply: impl AsyncFnOnce(&PackageName, &semver::Version) -> Result<(), tollgate_registry::RegistryError>,
) -> Result<VersionState, OpError> {
    let name = package_name(name)?;
    let version = version(text)?;
    check_namespace(&ctx.gateway, &ctx.scope().workspace_id, name.namespace())
        .await
        .map_err(op_error)?;
    apply(&name, &version).await.map_err(|e| op_error(registry_error(e)))?;
    let record = ctx
        .gateway
        .registry
        .index
        .version(&name, &version)
        .await
        .map_err(|e| op_error(registry_error(e.into())))?;
    Ok(VersionState {
        name: name.to_string(),
        version: version.to_string(),
        yanked: record.yanked,
        deprecated: record.deprecated,
    })
}

pub async fn yank(ctx: &Ctx, params: VersionParams) -> Result<VersionState, OpError> {
    let registry = &ctx.gateway.registry;
    change(ctx, &params.name, &params.version, async |n, v| {
        registry.yank(n, v, true).await
    })
    .await
}

pub async fn unyank(ctx: &Ctx, params: VersionParams) -> Result<VersionState, OpError> {
    let registry = &ctx.gateway.registry;
    change(ctx, &params.name, &params.version, async |n, v| {
        registry.yank(n, v, false).await
    })
    .await
}

pub async fn deprecate(ctx: &Ctx, params: DeprecateParams) -> Result<VersionState, OpError> {
    let registry = &ctx.gateway.registry;
    let message = params.message.clone();
    change(ctx, &params.name, &params.version, async |n, v| {
        registry.deprecate(n, v, message.as_deref()).await
    })
    .await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[derive(Serialize, JsonSchema)]
pub struct InstallEntry {
    pub provider: String,
    pub package: String,
    pub version: String,
    pub digest: String,
    /// The adapter name requests and the attempt trail show.
    pub adapter: String,
    pub installed_at_ms: i64,
}

#[derive(Serialize, JsonSchema)]
pub struct InstallList {
    pub installs: Vec<InstallEntry>,
}

fn entry(install: super::installs::InstallRecord) -> InstallEntry {
    InstallEntry {
        provider: install.provider,
        package: install.package.to_string(),
        version: install.version.to_string(),
        digest: install.digest.to_string(),
        adapter: install.adapter,
        installed_at_ms: install.installed_at_ms,
    }
}

pub async fn list_installs(ctx: &Ctx, _params: NoParams) -> Result<InstallList, OpError> {
    check_operator(&ctx.gateway, ctx.caller()?).map_err(op_error)?;
    Ok(InstallList {
        installs: ctx.gateway.installs.list().into_iter().map(entry).collect(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallParams {
    /// The provider to serve with the adapter (must be in the catalog).
    pub provider: String,
    /// `namespace/name` of a provider-adapter package.
    pub package: String,
    /// An exact version that is not yanked.
    pub version: String,
}

pub async fn install(ctx: &Ctx, params: InstallParams) -> Result<InstallEntry, OpError> {
    check_operator(&ctx.gateway, ctx.caller()?).map_err(op_error)?;
    let package = package_name(&params.package)?;
    let version = version(&params.version)?;
    let installed = super::installs::install(&ctx.gateway, &params.provider, &package, &version)
        .await
        .map_err(op_error)?;
    Ok(entry(installed))
}
