//! Operations on accounts, workspaces and namespaces. They check params and
//! rules, then call the accounts API (`tollgate_identity::accounts`) and the namespaces
//! API (`tollgate_packages::namespaces`), which own the tables.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::OpError;
use crate::registry::Ctx;
use crate::{Limits, Signups};
use tollgate_core::money::Nanos;
pub use tollgate_identity::accounts::Workspace;
use tollgate_identity::accounts::{Accounts, CreatedAccount};
use tollgate_identity::auth::KeyScope;
use tollgate_identity::auth::permissions::Role;
use tollgate_packages::Packages;
pub use tollgate_packages::namespaces::{Namespace, NamespaceList};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignupParams {
    /// Display name of the new user (and account).
    pub name: String,
    /// E-mail address; unique, used by `members.add`.
    pub email: String,
}

/// Input is checked before the client's sign-up budget is spent, so a typo
/// costs nothing; whether the e-mail is taken is found only after (by the
/// insert), so probing for addresses spends the budget.
pub async fn signup(
    (accounts, signups): (&Accounts, &Signups),
    ctx: &Ctx,
    params: SignupParams,
) -> Result<CreatedAccount, OpError> {
    let credit = Nanos::from_usd(signups.credit_usd())
        .map_err(|e| OpError::Internal(anyhow::anyhow!("control_plane.signup_credit_usd: {e}")))?;
    if params.name.trim().is_empty() || params.name.len() > 200 {
        return Err(OpError::InvalidParams("name must be 1 to 200 characters".into()));
    }
    let email = tollgate_identity::accounts::normalize_email(&params.email)
        .map_err(|e| OpError::InvalidParams(e.to_string()))?;
    if let Err(wait) = signups.permitted(ctx.client_ip) {
        return Err(OpError::ResourceExhausted(match wait {
            std::time::Duration::MAX => "Sign-up is closed on this gateway.".into(),
            wait => format!(
                "Too many sign-ups from your address; try again in {} s.",
                tollgate_web::rate_limit::retry_after_secs(wait)
            ),
        }));
    }
    Ok(accounts.signup(&params.name, Some(&email), credit).await?)
}

/// Params of an op that needs nothing but its target workspace.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Target workspace; defaults to the calling key's workspace.
    #[serde(default)]
    pub workspace_id: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub name: String,
}

#[derive(Serialize, JsonSchema)]
pub struct WorkspaceList {
    pub workspaces: Vec<Workspace>,
}

#[derive(Serialize, JsonSchema)]
pub struct Deleted {
    pub deleted: String,
}

fn check_name(name: &str) -> Result<String, OpError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(OpError::InvalidParams("name must be 1 to 100 characters".into()));
    }
    Ok(name.to_string())
}

async fn load(accounts: &Accounts, workspace_id: &str, role: Role) -> Result<Workspace, OpError> {
    accounts
        .workspace(workspace_id, role)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("workspace '{workspace_id}'")))
}

pub async fn create(accounts: &Accounts, ctx: &Ctx, params: CreateParams) -> Result<Workspace, OpError> {
    let name = check_name(&params.name)?;
    let caller = ctx.caller()?;
    if caller.scope == KeyScope::Workspace {
        return Err(OpError::PermissionDenied(format!(
            "this key may act only in workspace '{}'; create workspaces with a key of scope 'user'",
            caller.workspace_id
        )));
    }
    let user_id = caller
        .user_id
        .clone()
        .ok_or_else(|| OpError::PermissionDenied("this key belongs to no user; create a user key first".into()))?;
    let workspace_id = accounts.create_workspace(&caller.workspace_id, &user_id, &name).await?;
    load(accounts, &workspace_id, Role::Owner).await
}

pub async fn list(accounts: &Accounts, ctx: &Ctx, _params: ListParams) -> Result<WorkspaceList, OpError> {
    let caller = ctx.caller()?;
    // A key limited to its workspace sees only that one.
    let user_id = caller.user_id.as_ref().filter(|_| caller.scope == KeyScope::User);
    let workspaces = match user_id {
        Some(user_id) => accounts.workspaces_of(user_id).await?,
        None => accounts
            .workspace(&caller.workspace_id, caller.role)
            .await?
            .into_iter()
            .collect(),
    };
    Ok(WorkspaceList { workspaces })
}

pub async fn get(accounts: &Accounts, ctx: &Ctx, _params: Target) -> Result<Workspace, OpError> {
    let scope = ctx.scope();
    load(accounts, &scope.workspace_id, scope.role).await
}

pub async fn rename(accounts: &Accounts, ctx: &Ctx, params: RenameParams) -> Result<Workspace, OpError> {
    let name = check_name(&params.name)?;
    let scope = ctx.scope();
    accounts.rename_workspace(&scope.workspace_id, &name).await?;
    load(accounts, &scope.workspace_id, scope.role).await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SsoParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Require sign-in through an identity provider for the console and for
    /// creating keys.
    pub required: bool,
}

/// Turns the workspace's SSO requirement on (plans with `sso` only) or off.
/// Keys that exist keep working until revoked.
pub async fn sso_set(
    (accounts, billing): (&Accounts, &tollgate_billing::Billing),
    ctx: &Ctx,
    params: SsoParams,
) -> Result<Workspace, OpError> {
    let scope = ctx.scope();
    if params.required {
        let plan = billing.plan_of(&scope.workspace_id).await?;
        if !plan.sso {
            return Err(OpError::FailedPrecondition(format!(
                "the '{}' plan has no SSO enforcement; move to a plan with `sso` (billing.plans.list)",
                plan.id
            )));
        }
    }
    accounts.set_requires_sso(&scope.workspace_id, params.required).await?;
    load(accounts, &scope.workspace_id, scope.role).await
}

/// Soft delete: the ledger keeps referencing the workspace, so its rows stay;
/// its keys are revoked, and every gateway drops them from its key cache.
pub async fn delete(accounts: &Accounts, ctx: &Ctx, _params: Target) -> Result<Deleted, OpError> {
    let workspace_id = ctx.scope().workspace_id.clone();
    accounts.delete_workspace(&workspace_id).await?;
    Ok(Deleted { deleted: workspace_id })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Lowercase letters, digits and '-', 1 to 64 characters.
    pub name: String,
}

pub async fn namespace_create(
    (packages, limits): (&Packages, &Limits),
    ctx: &Ctx,
    params: NamespaceParams,
) -> Result<Namespace, OpError> {
    let limit = limits.namespaces_per_workspace;
    let workspace_id = &ctx.scope().workspace_id;
    Ok(packages.create_namespace(workspace_id, &params.name, limit).await?)
}

pub async fn namespace_list(packages: &Packages, ctx: &Ctx, _params: Target) -> Result<NamespaceList, OpError> {
    let namespaces = packages.namespaces().list(&ctx.scope().workspace_id).await?;
    Ok(NamespaceList { namespaces })
}

pub async fn namespace_delete(packages: &Packages, ctx: &Ctx, params: NamespaceParams) -> Result<Deleted, OpError> {
    packages
        .namespaces()
        .delete(&ctx.scope().workspace_id, &params.name)
        .await?;
    Ok(Deleted { deleted: params.name })
}
