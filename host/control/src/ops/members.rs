//! Operations on members (users and their roles in a workspace) and API keys:
//! the owner rules and param checks, over the accounts API
//! (`tollgate_identity::accounts`), which owns the tables and makes every change that
//! alters what a key may do reach every gateway.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::workspaces::Deleted;
use crate::Limits;
use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_billing::Billing;
use tollgate_identity::accounts::Accounts;
pub use tollgate_identity::accounts::{KeyInfo, Member};
use tollgate_identity::auth::permissions::Role;
use tollgate_identity::auth::tool_policy::{self, ToolPolicy};
use tollgate_identity::auth::{KeyScope, Principal};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// E-mail of a user who has signed up.
    pub email: String,
    pub role: Role,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRoleParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub user_id: String,
    pub role: Role,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub user_id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct MemberList {
    pub members: Vec<Member>,
}

/// Only an owner may grant the owner role or change an owner.
fn guard_owner_rule(ctx: &Ctx, touches_owner: bool) -> Result<(), OpError> {
    if touches_owner && ctx.scope().role != Role::Owner {
        return Err(OpError::PermissionDenied(
            "only an owner may grant or change the owner role".into(),
        ));
    }
    Ok(())
}

async fn member(accounts: &Accounts, ctx: &Ctx, user_id: &str) -> Result<Member, OpError> {
    accounts
        .member(&ctx.scope().workspace_id, user_id)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("member '{user_id}'")))
}

pub async fn add((accounts, billing): (&Accounts, &Billing), ctx: &Ctx, params: AddParams) -> Result<Member, OpError> {
    guard_owner_rule(ctx, params.role == Role::Owner)?;
    let email = tollgate_identity::accounts::normalize_email(&params.email)
        .map_err(|e| OpError::InvalidParams(e.to_string()))?;
    let user_id = accounts
        .user_by_email(&email)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("user '{email}'")))?;
    let workspace_id = &ctx.scope().workspace_id;
    let plan = billing.plan_of(workspace_id).await?;
    let added = accounts
        .add_member(workspace_id, &user_id, &email, params.role, plan.seats)
        .await;
    match added {
        Err(tollgate_identity::accounts::AccountError::SeatLimit { count, limit }) => {
            Err(OpError::ResourceExhausted(format!(
                "plan_limit_reached: this workspace has {count} members, all {limit} seats its '{}' plan allows; remove a member or move to a plan with more seats (`billing.plans.list`)",
                plan.id
            )))
        }
        added => {
            added?;
            member(accounts, ctx, &user_id).await
        }
    }
}

pub async fn list(accounts: &Accounts, ctx: &Ctx, _params: super::workspaces::Target) -> Result<MemberList, OpError> {
    let members = accounts.members(&ctx.scope().workspace_id).await?;
    Ok(MemberList { members })
}

/// Checks the owner rules for changing `user_id`, who must be a member.
async fn guard_change(accounts: &Accounts, ctx: &Ctx, user_id: &str, new_role: Option<Role>) -> Result<(), OpError> {
    let current = member(accounts, ctx, user_id).await?.role;
    guard_owner_rule(ctx, current == Role::Owner || new_role == Some(Role::Owner))?;
    if current == Role::Owner
        && new_role != Some(Role::Owner)
        && accounts.owner_count(&ctx.scope().workspace_id).await? <= 1
    {
        return Err(OpError::FailedPrecondition(
            "a workspace must keep at least one owner".into(),
        ));
    }
    Ok(())
}

pub async fn set_role(accounts: &Accounts, ctx: &Ctx, params: SetRoleParams) -> Result<Member, OpError> {
    guard_change(accounts, ctx, &params.user_id, Some(params.role)).await?;
    accounts
        .set_role(&ctx.scope().workspace_id, &params.user_id, params.role)
        .await?;
    member(accounts, ctx, &params.user_id).await
}

/// Removes the membership; the user's keys in this workspace stop resolving.
pub async fn remove(accounts: &Accounts, ctx: &Ctx, params: UserParams) -> Result<Deleted, OpError> {
    guard_change(accounts, ctx, &params.user_id, None).await?;
    accounts
        .remove_member(&ctx.scope().workspace_id, &params.user_id)
        .await?;
    Ok(Deleted {
        deleted: params.user_id,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyCreateParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// A label, e.g. "ci".
    #[serde(default)]
    pub name: Option<String>,
    /// `user` (default): the key acts as you in each of your workspaces;
    /// `workspace`: only in this one. A `workspace` key makes only
    /// `workspace` keys.
    #[serde(default)]
    pub scope: Option<KeyScope>,
    /// The key's own data-plane limit in requests per minute (1 to
    /// 1,000,000). It can only tighten the gateway's
    /// `auth.key_requests_per_minute`, never loosen it.
    #[serde(default)]
    pub requests_per_minute: Option<u32>,
    /// Limits the key over MCP to these installs (all they offer) and
    /// `<install>__<tool>` names (one tool or prompt); its role's list, if
    /// the workspace set one, still applies. A key with a list makes only
    /// keys with a list within it.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub key_id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct CreatedKey {
    pub key_id: String,
    pub workspace_id: String,
    pub name: String,
    pub hint: String,
    pub scope: KeyScope,
    pub requests_per_minute: Option<u32>,
    /// The installs and tools it may reach over MCP; `null`: what its role may.
    pub tools: Option<Vec<String>>,
    /// The secret. Shown once; only its hash is stored.
    pub api_key: String,
}

#[derive(Serialize, JsonSchema)]
pub struct KeyList {
    pub keys: Vec<KeyInfo>,
}

#[derive(Serialize, JsonSchema)]
pub struct RevokedKey {
    pub key_id: String,
    pub revoked_at: i64,
}

pub async fn key_create(
    (accounts, limits): (&Accounts, &Limits),
    ctx: &Ctx,
    params: KeyCreateParams,
) -> Result<CreatedKey, OpError> {
    let name = params.name.unwrap_or_default().trim().to_string();
    if name.chars().count() > 100 {
        return Err(OpError::InvalidParams("name must be at most 100 characters".into()));
    }
    let caller = ctx.caller()?;
    // A key confined to its workspace must not mint a way out of it.
    let scope = match (caller.scope, params.scope) {
        (KeyScope::Workspace, Some(KeyScope::User)) => {
            return Err(OpError::PermissionDenied(
                "a key limited to one workspace may only create keys limited to one workspace".into(),
            ));
        }
        (caller_scope, requested) => requested.unwrap_or(caller_scope),
    };
    let requests_per_minute = match params.requests_per_minute {
        None => None,
        Some(n @ 1..=1_000_000) => Some(n),
        Some(_) => {
            return Err(OpError::InvalidParams(
                "requests_per_minute must be 1 to 1000000".into(),
            ));
        }
    };
    let default = limits.key_requests_per_minute;
    if let Some(n) = requests_per_minute
        && default > 0
        && n > default
    {
        return Err(OpError::InvalidParams(format!(
            "requests_per_minute may not exceed this gateway's limit of {default} (auth.key_requests_per_minute)"
        )));
    }
    // A key held to a list must not mint a way out of it (its role's list
    // binds the new key as well, being the same user's).
    let tools = key_tools(caller, params.tools, "create keys limited")?;
    let workspace_id = ctx.scope().workspace_id.clone();
    // Under SSO a key is made only by someone signed in through the identity
    // provider, so leaving the company's directory ends the making of keys.
    if !caller.signed_in_with_oidc() && accounts.requires_sso(&workspace_id).await? {
        return Err(OpError::PermissionDenied(format!(
            "{}; create keys from the console after signing in there",
            crate::registry::SSO_REQUIRED
        )));
    }
    let user_id = caller.user_id.clone();
    let options = tollgate_identity::accounts::KeyOptions {
        scope,
        requests_per_minute,
        tools: tools.clone(),
    };
    let key = accounts
        .create_key(&workspace_id, user_id.as_deref(), &name, &options)
        .await?;
    Ok(CreatedKey {
        key_id: key.key_id,
        workspace_id,
        name,
        hint: key.hint,
        scope,
        requests_per_minute,
        tools,
        api_key: key.secret,
    })
}

pub async fn key_list(accounts: &Accounts, ctx: &Ctx, _params: super::workspaces::Target) -> Result<KeyList, OpError> {
    let keys = accounts.keys(&ctx.scope().workspace_id).await?;
    Ok(KeyList { keys })
}

/// A key's tool list as given, normalized; one that a caller held to a list
/// of its own may give only when it lies within that list (`null`, no list,
/// never does). `doing` completes "may only … to tools it may use itself".
fn key_tools(caller: &Principal, tools: Option<Vec<String>>, doing: &str) -> Result<Option<Vec<String>>, OpError> {
    let tools = tools
        .map(tool_policy::normalize)
        .transpose()
        .map_err(OpError::InvalidParams)?;
    if let Some(own) = &caller.tools.key {
        let within = ToolPolicy {
            key: Some(own.clone()),
            role: None,
        };
        if !tools.as_deref().is_some_and(|tools| within.covers(tools)) {
            return Err(OpError::PermissionDenied(format!(
                "a key limited to some tools may only {doing} to tools it may use itself"
            )));
        }
    }
    Ok(tools)
}

/// Whose keys a role may revoke or `change` otherwise (docs/control-plane.md,
/// "Keys"): an owner any key; an admin any key but an owner's (a user-less
/// key acts as the owner); a developer only their own.
async fn guard_key_change(accounts: &Accounts, ctx: &Ctx, key_id: &str, change: &str) -> Result<(), OpError> {
    let caller = ctx.caller()?;
    let role = ctx.scope().role;
    if role == Role::Owner {
        return Ok(());
    }
    let workspace_id = &ctx.scope().workspace_id;
    let key_user = accounts
        .key_user(workspace_id, key_id)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("key '{key_id}'")))?;
    let own = key_user.is_some() && key_user == caller.user_id;
    let allowed = match role {
        Role::Owner => true,
        _ if own => true,
        Role::Admin => match &key_user {
            None => false,
            Some(user) => accounts.role_in(workspace_id, user).await? != Some(Role::Owner),
        },
        Role::Developer | Role::Viewer => false,
    };
    match allowed {
        true => Ok(()),
        false => Err(OpError::PermissionDenied(match role {
            Role::Admin => format!("key '{key_id}' belongs to an owner; only an owner may {change} it"),
            _ => format!(
                "key '{key_id}' is not yours; a {} may {change} only keys they created",
                role.as_str()
            ),
        })),
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeySetToolsParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub key_id: String,
    /// Installs and `<install>__<tool>` names the key may reach over MCP;
    /// `null` removes its list (it may then reach what its role may).
    pub tools: Option<Vec<String>>,
}

#[derive(Serialize, JsonSchema)]
pub struct KeyTools {
    pub key_id: String,
    /// The key's list as stored (sorted, without repeats); `null`: none.
    pub tools: Option<Vec<String>>,
}

/// Replaces a key's own tool list. Whose keys a role may change is whose it
/// may revoke (a narrower list is a partial revocation; a wider one gives
/// back what its maker could give). A caller held to a list of its own may
/// set only lists within it, never none, as when it creates a key.
pub async fn key_set_tools(accounts: &Accounts, ctx: &Ctx, params: KeySetToolsParams) -> Result<KeyTools, OpError> {
    let tools = key_tools(ctx.caller()?, params.tools, "set lists limited")?;
    guard_key_change(accounts, ctx, &params.key_id, "change the tools of").await?;
    let changed = accounts
        .set_key_tools(&ctx.scope().workspace_id, &params.key_id, tools.as_deref())
        .await?;
    if !changed {
        return Err(OpError::NotFound(format!("active key '{}'", params.key_id)));
    }
    Ok(KeyTools {
        key_id: params.key_id,
        tools,
    })
}

/// Revokes the key: the next data-plane request with it gets 401, on this
/// gateway at once and on others sharing the database within about a second
/// (see docs/control-plane.md).
pub async fn key_revoke(accounts: &Accounts, ctx: &Ctx, params: KeyParams) -> Result<RevokedKey, OpError> {
    guard_key_change(accounts, ctx, &params.key_id, "revoke").await?;
    let revoked_at = accounts
        .revoke_key(&ctx.scope().workspace_id, &params.key_id)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("key '{}'", params.key_id)))?;
    Ok(RevokedKey {
        key_id: params.key_id,
        revoked_at,
    })
}
