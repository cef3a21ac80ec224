//! Operations on members (users and their roles in a workspace) and API keys.
//! Every change that alters what a key may do commits through
//! `KeyResolver::commit_change`, so every gateway sharing the database sees it
//! on the next request (see `auth.rs`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::OpError;
use super::registry::Ctx;
use super::workspaces::Deleted;
use crate::auth::permissions::Role;
use crate::auth::{KeyChange, KeyScope};
use tollgate_core::db::now_unix;

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
pub struct Member {
    pub user_id: String,
    pub name: String,
    pub email: String,
    pub role: Role,
    pub created_at: i64,
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

async fn member(ctx: &Ctx, user_id: &str) -> Result<Member, OpError> {
    let row: Option<(String, String, String, i64)> = sqlx::query_as(
        "SELECT u.name, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id \
         WHERE m.workspace_id = $1 AND m.user_id = $2",
    )
    .bind(&ctx.scope().workspace_id)
    .bind(user_id)
    .fetch_optional(&ctx.database().pool)
    .await?;
    let (name, email, role, created_at) = row.ok_or_else(|| OpError::NotFound(format!("member '{user_id}'")))?;
    Ok(Member {
        user_id: user_id.to_string(),
        name,
        email,
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        created_at,
    })
}

async fn owner_count(ctx: &Ctx) -> Result<i64, OpError> {
    Ok(sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM memberships WHERE workspace_id = $1 AND role = 'owner'",
    )
    .bind(&ctx.scope().workspace_id)
    .fetch_one(&ctx.database().pool)
    .await?)
}

pub async fn add(ctx: &Ctx, params: AddParams) -> Result<Member, OpError> {
    guard_owner_rule(ctx, params.role == Role::Owner)?;
    let email = crate::accounts::normalize_email(&params.email).map_err(|e| OpError::InvalidParams(e.to_string()))?;
    let user_id: Option<String> = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_optional(&ctx.database().pool)
        .await?;
    let user_id = user_id.ok_or_else(|| OpError::NotFound(format!("user '{email}'")))?;
    let mut tx = ctx.database().begin_write().await?;
    let exists: Option<String> =
        sqlx::query_scalar("SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2")
            .bind(&ctx.scope().workspace_id)
            .bind(&user_id)
            .fetch_optional(&mut *tx)
            .await?;
    if exists.is_some() {
        return Err(OpError::AlreadyExists(format!("'{email}' is already a member")));
    }
    sqlx::query("INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&ctx.scope().workspace_id)
        .bind(&user_id)
        .bind(params.role.as_str())
        .bind(now_unix())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    member(ctx, &user_id).await
}

pub async fn list(ctx: &Ctx, _params: super::workspaces::Target) -> Result<MemberList, OpError> {
    let rows: Vec<(String, String, String, String, i64)> = sqlx::query_as(
        "SELECT u.id, u.name, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id \
         WHERE m.workspace_id = $1 ORDER BY m.created_at, u.id",
    )
    .bind(&ctx.scope().workspace_id)
    .fetch_all(&ctx.database().pool)
    .await?;
    Ok(MemberList {
        members: rows
            .into_iter()
            .map(|(user_id, name, email, role, created_at)| Member {
                user_id,
                name,
                email,
                role: Role::parse(&role).unwrap_or(Role::Viewer),
                created_at,
            })
            .collect(),
    })
}

/// Checks the owner rules for changing `user_id`, who must be a member.
async fn guard_change(ctx: &Ctx, user_id: &str, new_role: Option<Role>) -> Result<(), OpError> {
    let current = member(ctx, user_id).await?.role;
    guard_owner_rule(ctx, current == Role::Owner || new_role == Some(Role::Owner))?;
    if current == Role::Owner && new_role != Some(Role::Owner) && owner_count(ctx).await? <= 1 {
        return Err(OpError::FailedPrecondition(
            "a workspace must keep at least one owner".into(),
        ));
    }
    Ok(())
}

fn member_change(ctx: &Ctx, user_id: &str) -> KeyChange {
    KeyChange::Member {
        workspace_id: ctx.scope().workspace_id.clone(),
        user_id: user_id.to_string(),
    }
}

pub async fn set_role(ctx: &Ctx, params: SetRoleParams) -> Result<Member, OpError> {
    guard_change(ctx, &params.user_id, Some(params.role)).await?;
    let mut tx = ctx.database().begin_write().await?;
    sqlx::query("UPDATE memberships SET role = $1 WHERE workspace_id = $2 AND user_id = $3")
        .bind(params.role.as_str())
        .bind(&ctx.scope().workspace_id)
        .bind(&params.user_id)
        .execute(&mut *tx)
        .await?;
    ctx.gateway
        .keys
        .commit_change(tx, member_change(ctx, &params.user_id))
        .await?;
    member(ctx, &params.user_id).await
}

/// Removes the membership; the user's keys in this workspace stop resolving.
pub async fn remove(ctx: &Ctx, params: UserParams) -> Result<Deleted, OpError> {
    guard_change(ctx, &params.user_id, None).await?;
    let mut tx = ctx.database().begin_write().await?;
    sqlx::query("DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2")
        .bind(&ctx.scope().workspace_id)
        .bind(&params.user_id)
        .execute(&mut *tx)
        .await?;
    ctx.gateway
        .keys
        .commit_change(tx, member_change(ctx, &params.user_id))
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
    /// `limits.key_requests_per_minute`, never loosen it.
    #[serde(default)]
    pub requests_per_minute: Option<u32>,
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
    /// The secret. Shown once; only its hash is stored.
    pub api_key: String,
}

#[derive(Serialize, JsonSchema)]
pub struct KeyInfo {
    pub key_id: String,
    pub name: String,
    pub hint: String,
    pub user_id: Option<String>,
    pub scope: KeyScope,
    pub requests_per_minute: Option<u32>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
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

pub async fn key_create(ctx: &Ctx, params: KeyCreateParams) -> Result<CreatedKey, OpError> {
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
    let default = ctx.gateway.config.limits.key_requests_per_minute;
    if let Some(n) = requests_per_minute
        && default > 0
        && n > default
    {
        return Err(OpError::InvalidParams(format!(
            "requests_per_minute may not exceed this gateway's limit of {default} (limits.key_requests_per_minute)"
        )));
    }
    let workspace_id = ctx.scope().workspace_id.clone();
    let user_id = caller.user_id.clone();
    let options = crate::accounts::KeyOptions {
        scope,
        requests_per_minute,
    };
    let mut tx = ctx.database().begin_write().await?;
    let (key_id, api_key) =
        crate::accounts::insert_key(&mut tx, &workspace_id, user_id.as_deref(), &name, &options).await?;
    tx.commit().await?;
    let hint: String = sqlx::query_scalar("SELECT hint FROM api_keys WHERE id = $1")
        .bind(&key_id)
        .fetch_one(&ctx.database().pool)
        .await?;
    Ok(CreatedKey {
        key_id,
        workspace_id,
        name,
        hint,
        scope,
        requests_per_minute,
        api_key,
    })
}

pub async fn key_list(ctx: &Ctx, _params: super::workspaces::Target) -> Result<KeyList, OpError> {
    type Row = (
        String,
        String,
        String,
        Option<String>,
        String,
        Option<i64>,
        i64,
        Option<i64>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, name, hint, user_id, scope, requests_per_minute, created_at, revoked_at FROM api_keys \
         WHERE workspace_id = $1 ORDER BY id",
    )
    .bind(&ctx.scope().workspace_id)
    .fetch_all(&ctx.database().pool)
    .await?;
    Ok(KeyList {
        keys: rows
            .into_iter()
            .map(
                |(key_id, name, hint, user_id, scope, requests_per_minute, created_at, revoked_at)| KeyInfo {
                    key_id,
                    name,
                    hint,
                    user_id,
                    scope: KeyScope::parse(&scope).unwrap_or(KeyScope::Workspace),
                    requests_per_minute: requests_per_minute.and_then(|n| u32::try_from(n).ok()),
                    created_at,
                    revoked_at,
                },
            )
            .collect(),
    })
}

/// Revokes the key: the next data-plane request with it gets 401, on this
/// gateway at once and on others sharing the database within about a second
/// (see docs/control-plane.md).
pub async fn key_revoke(ctx: &Ctx, params: KeyParams) -> Result<RevokedKey, OpError> {
    let row: Option<(Vec<u8>, Option<i64>)> =
        sqlx::query_as("SELECT key_hash, revoked_at FROM api_keys WHERE id = $1 AND workspace_id = $2")
            .bind(&params.key_id)
            .bind(&ctx.scope().workspace_id)
            .fetch_optional(&ctx.database().pool)
            .await?;
    let (hash, revoked_at) = row.ok_or_else(|| OpError::NotFound(format!("key '{}'", params.key_id)))?;
    let hash = <[u8; 32]>::try_from(hash.as_slice())
        .map_err(|_| OpError::Internal(anyhow::anyhow!("key '{}' has a malformed hash", params.key_id)))?;
    let revoked_at = match revoked_at {
        Some(at) => at,
        None => {
            let now = now_unix();
            let mut tx = ctx.database().begin_write().await?;
            sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2")
                .bind(now)
                .bind(&params.key_id)
                .execute(&mut *tx)
                .await?;
            ctx.gateway.keys.commit_change(tx, KeyChange::key(&hash)).await?;
            now
        }
    };
    Ok(RevokedKey {
        key_id: params.key_id,
        revoked_at,
    })
}
