//! Whom installs trust, as operations: a namespace's signing keys
//! (`namespaces.keys.add`, `.list`, `.revoke`) and a workspace's package
//! policy (`workspaces.package-policy.get`, `.set`), over the packages
//! concern's API (`tollgate_packages::trust`). docs/registry.md, "Signed
//! packages", says what they mean.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_packages::Packages;
use tollgate_packages::trust::PolicyRecord;
use tollgate_registry::{NamespaceKey, PackagePolicy};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyAddParams {
    /// Target workspace; defaults to the calling key's workspace.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// A namespace of the workspace.
    pub namespace: String,
    /// The ed25519 public key, 32 bytes base64url (what `tollgate package
    /// keygen` prints).
    pub public_key: String,
    /// A label for people, e.g. "ci".
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyListParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub namespace: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub namespace: String,
    /// 16 hex digits, as `namespaces.keys.list` shows.
    pub key_id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct KeyList {
    /// Oldest first, revoked keys included.
    pub keys: Vec<NamespaceKey>,
}

pub async fn key_add(packages: &Packages, ctx: &Ctx, params: KeyAddParams) -> Result<NamespaceKey, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let name = params.name.as_deref().unwrap_or("");
    Ok(packages
        .add_signing_key(workspace, &params.namespace, &params.public_key, name)
        .await?)
}

pub async fn key_list(packages: &Packages, ctx: &Ctx, params: KeyListParams) -> Result<KeyList, OpError> {
    let keys = packages
        .signing_keys(&ctx.scope().workspace_id, &params.namespace)
        .await?;
    Ok(KeyList { keys })
}

pub async fn key_revoke(packages: &Packages, ctx: &Ctx, params: KeyParams) -> Result<NamespaceKey, OpError> {
    Ok(packages
        .revoke_signing_key(&ctx.scope().workspace_id, &params.namespace, &params.key_id)
        .await?)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyGetParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicySetParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Namespaces (or `*`: every namespace) whose packages this workspace
    /// installs only when signed by a registered, unrevoked key of their
    /// namespace; `[]` requires nothing.
    pub require_signed: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Policy {
    pub workspace_id: String,
    pub require_signed: Vec<String>,
    /// When it was last set; `null`: never.
    pub updated_at_ms: Option<i64>,
}

fn shown(workspace_id: &str, record: PolicyRecord) -> Policy {
    Policy {
        workspace_id: workspace_id.to_string(),
        require_signed: record.policy.require_signed,
        updated_at_ms: record.updated_at_ms,
    }
}

pub async fn policy_get(packages: &Packages, ctx: &Ctx, _params: PolicyGetParams) -> Result<Policy, OpError> {
    let workspace = &ctx.scope().workspace_id;
    Ok(shown(workspace, packages.package_policy(workspace).await?))
}

pub async fn policy_set(packages: &Packages, ctx: &Ctx, params: PolicySetParams) -> Result<Policy, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let policy = PackagePolicy {
        require_signed: params.require_signed,
    };
    Ok(shown(workspace, packages.set_package_policy(workspace, policy).await?))
}
