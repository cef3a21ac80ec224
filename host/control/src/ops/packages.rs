//! The registry as operations (`packages.*`, `adapters.*`), so A2A clients
//! can search, publish, yank, deprecate and install adapters. They apply the
//! same checks as the registry's HTTP API, through the packages concern's
//! API ([`Packages`]); its errors become `OpError`s by variant
//! (`control/error.rs`). `packages.publish` carries the content inline
//! (base64, capped); larger packages use HTTP.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_registry::{Capabilities, PackageKind, PackageName, PackageSignature, Signer};

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_packages::installs::InstallRecord;
use tollgate_packages::{Packages, VersionChange};

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

pub async fn search(packages: &Packages, ctx: &Ctx, params: SearchParams) -> Result<PackageList, OpError> {
    let kind = params
        .kind
        .as_deref()
        .map(str::parse::<PackageKind>)
        .transpose()
        .map_err(OpError::InvalidParams)?;
    let found = packages
        .search(kind, params.q.as_deref(), params.limit.unwrap_or(50), viewer(ctx))
        .await?;
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
    /// Who signed it (`null`: unsigned), checked now against the
    /// namespace's keys.
    pub signature: Option<Signer>,
    /// What it asks for when it runs.
    pub capabilities: Capabilities,
    /// Why an install would refuse it (its manifest or signature was
    /// altered in storage); absent when it passes its checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct PackageInfo {
    pub name: String,
    pub kind: String,
    pub description: String,
    /// Newest first.
    pub versions: Vec<VersionEntry>,
}

/// The workspace a public op reads as: the key's, or none for an anonymous call.
fn viewer(ctx: &Ctx) -> Option<&str> {
    ctx.caller.as_deref().map(|caller| caller.workspace_id.as_str())
}

pub async fn get(packages: &Packages, ctx: &Ctx, params: PackageParams) -> Result<PackageInfo, OpError> {
    let name = package_name(&params.name)?;
    // A private package is missing to anyone but its workspace.
    let versions = packages.versions(&name, viewer(ctx)).await?;
    let newest = &versions[0].manifest;
    let mut entries = Vec::with_capacity(versions.len());
    for v in &versions {
        let (signature, refused) = match packages.signer(v).await {
            Ok(signer) => (signer, None),
            Err(error) => (None, Some(error.to_string())),
        };
        entries.push(VersionEntry {
            version: v.version.to_string(),
            digest: v.digest.to_string(),
            size: v.size,
            yanked: v.yanked,
            deprecated: v.deprecated.clone(),
            published_at_ms: v.published_at_ms,
            signature,
            capabilities: Capabilities::of(&v.manifest),
            refused,
        });
    }
    Ok(PackageInfo {
        name: name.to_string(),
        kind: newest.kind.to_string(),
        description: newest.description.clone(),
        versions: entries,
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
    packages: &Packages,
    ctx: &Ctx,
    name: &str,
    text: &str,
    change: VersionChange<'_>,
) -> Result<VersionState, OpError> {
    let name = package_name(name)?;
    let version = version(text)?;
    let record = packages
        .change_version(&ctx.scope().workspace_id, &name, &version, change)
        .await?;
    Ok(VersionState {
        name: name.to_string(),
        version: version.to_string(),
        yanked: record.yanked,
        deprecated: record.deprecated,
    })
}

pub async fn yank(packages: &Packages, ctx: &Ctx, params: VersionParams) -> Result<VersionState, OpError> {
    change(packages, ctx, &params.name, &params.version, VersionChange::Yank(true)).await
}

pub async fn unyank(packages: &Packages, ctx: &Ctx, params: VersionParams) -> Result<VersionState, OpError> {
    change(packages, ctx, &params.name, &params.version, VersionChange::Yank(false)).await
}

pub async fn deprecate(packages: &Packages, ctx: &Ctx, params: DeprecateParams) -> Result<VersionState, OpError> {
    let message = params.message.as_deref();
    change(
        packages,
        ctx,
        &params.name,
        &params.version,
        VersionChange::Deprecate(message),
    )
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
    /// Who signed the version (`null`: unsigned).
    pub signature: Option<Signer>,
    /// What it asks for (an adapter: nothing).
    pub capabilities: Capabilities,
}

#[derive(Serialize, JsonSchema)]
pub struct InstallList {
    pub installs: Vec<InstallEntry>,
}

fn entry(install: InstallRecord) -> InstallEntry {
    InstallEntry {
        provider: install.provider,
        package: install.package.to_string(),
        version: install.version.to_string(),
        digest: install.digest.to_string(),
        adapter: install.adapter,
        installed_at_ms: install.installed_at_ms,
        signature: install.signature,
        capabilities: install.capabilities,
    }
}

pub async fn list_installs(packages: &Packages, ctx: &Ctx, _params: NoParams) -> Result<InstallList, OpError> {
    packages.check_operator(ctx.caller()?)?;
    Ok(InstallList {
        installs: packages.adapter_installs().into_iter().map(entry).collect(),
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

/// The operator's own workspace's package policy applies.
pub async fn install(packages: &Packages, ctx: &Ctx, params: InstallParams) -> Result<InstallEntry, OpError> {
    let caller = ctx.caller()?;
    packages.check_operator(caller)?;
    let package = package_name(&params.package)?;
    let version = version(&params.version)?;
    let installed = packages
        .install(&caller.workspace_id, &params.provider, &package, &version)
        .await?;
    Ok(entry(installed))
}

/// Largest package content `packages.publish` carries (decoded). Larger
/// packages go through the HTTP API, which streams the blob.
pub const MAX_INLINE_CONTENT: usize = 768 << 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishParams {
    /// The publishing workspace (default: the key's).
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The manifest, as for `PUT /v1/packages/{namespace}/{name}/{version}`;
    /// its `content.digest` and `content.size` must describe `content_base64`.
    pub manifest: serde_json::Value,
    /// The package content, base64 (standard alphabet), at most 768 KiB decoded.
    pub content_base64: String,
    /// `public` or `private` (only this workspace reads it, blobs included).
    /// Absent: unchanged, or for a new package its kind's default (actors
    /// private, the rest public).
    #[serde(default)]
    pub visibility: Option<String>,
    /// The publisher's signature over the manifest and content
    /// (docs/registry.md, "What is signed"), by a key registered for the
    /// namespace (`namespaces.keys.add`).
    #[serde(default)]
    pub signature: Option<PackageSignature>,
}

#[derive(Serialize, JsonSchema)]
pub struct PublishedVersion {
    pub name: String,
    pub version: String,
    pub digest: String,
    /// What a signature covers of the manifest.
    pub manifest_digest: String,
    /// The key that signed it, when signed.
    pub signed_by: Option<String>,
}

pub async fn publish(packages: &Packages, ctx: &Ctx, params: PublishParams) -> Result<PublishedVersion, OpError> {
    use base64::Engine;
    if params.content_base64.len() > MAX_INLINE_CONTENT.div_ceil(3) * 4 {
        return Err(OpError::InvalidParams(format!(
            "content_base64 is larger than {MAX_INLINE_CONTENT} bytes decoded; publish larger packages over HTTP (`tollgate package publish`)"
        )));
    }
    let content = base64::engine::general_purpose::STANDARD
        .decode(params.content_base64.as_bytes())
        .map_err(|e| OpError::InvalidParams(format!("content_base64 is not base64: {e}")))?;
    let manifest = serde_json::to_vec(&params.manifest)
        .map_err(|e| OpError::Internal(e.into()))
        .and_then(|bytes| {
            tollgate_registry::Manifest::from_json(&bytes).map_err(|e| OpError::InvalidParams(e.to_string()))
        })?;
    let visibility = parse_visibility(params.visibility.as_deref())?;
    let caller = ctx.caller()?;
    let workspace = &ctx.scope().workspace_id;
    let publisher = format!("{workspace}:{}", caller.key_id);
    let published = packages
        .publish_with_content(
            workspace,
            &publisher,
            &manifest,
            content.into(),
            params.signature.as_ref(),
        )
        .await?;
    if let Some(visibility) = visibility {
        packages.set_visibility(&published.name, visibility).await?;
    }
    Ok(PublishedVersion {
        name: published.name.to_string(),
        version: published.version.to_string(),
        digest: published.digest.to_string(),
        manifest_digest: published.manifest_digest.to_string(),
        signed_by: published.signed_by,
    })
}

/// A `visibility` param: `public` or `private`.
pub fn parse_visibility(text: Option<&str>) -> Result<Option<tollgate_registry::Visibility>, OpError> {
    text.map(str::parse).transpose().map_err(OpError::InvalidParams)
}
