//! Operations on accounts, workspaces and namespaces.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::OpError;
use super::registry::Ctx;
use crate::accounts::CreatedAccount;
use crate::auth::KeyScope;
use tollgate_core::db::{new_id, now_unix};
use tollgate_core::money::Nanos;

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
pub async fn signup(ctx: &Ctx, params: SignupParams) -> Result<CreatedAccount, OpError> {
    let settings = &ctx.gateway.config.control_plane;
    let credit = Nanos::from_usd(&settings.signup_credit_usd)
        .map_err(|e| OpError::Internal(anyhow::anyhow!("control_plane.signup_credit_usd: {e}")))?;
    if params.name.trim().is_empty() || params.name.len() > 200 {
        return Err(OpError::InvalidParams("name must be 1 to 200 characters".into()));
    }
    let email = crate::accounts::normalize_email(&params.email).map_err(|e| OpError::InvalidParams(e.to_string()))?;
    if let Err(wait) = ctx.gateway.control.signup_permitted(ctx.client_ip) {
        return Err(OpError::ResourceExhausted(match wait {
            std::time::Duration::MAX => "Sign-up is closed on this gateway.".into(),
            wait => format!(
                "Too many sign-ups from your address; try again in {} s.",
                crate::rate_limit::retry_after_secs(wait)
            ),
        }));
    }
    crate::accounts::signup(ctx.database(), &params.name, Some(&email), credit)
        .await
        .map_err(|e| match e.to_string().strip_prefix("EMAIL_TAKEN: ") {
            Some(message) => OpError::AlreadyExists(message.to_string()),
            None => OpError::Internal(e),
        })
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
pub struct Workspace {
    pub workspace_id: String,
    pub name: String,
    pub plan: String,
    /// The caller's role in this workspace.
    pub role: String,
    pub created_at: i64,
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

pub async fn is_live(ctx: &Ctx, workspace_id: &str) -> Result<bool, OpError> {
    let found: Option<String> = sqlx::query_scalar("SELECT id FROM workspaces WHERE id = $1 AND deleted_at IS NULL")
        .bind(workspace_id)
        .fetch_optional(&ctx.database().pool)
        .await?;
    Ok(found.is_some())
}

async fn load(ctx: &Ctx, workspace_id: &str, role: &str) -> Result<Workspace, OpError> {
    let row: Option<(String, String, i64)> =
        sqlx::query_as("SELECT name, plan, created_at FROM workspaces WHERE id = $1 AND deleted_at IS NULL")
            .bind(workspace_id)
            .fetch_optional(&ctx.database().pool)
            .await?;
    let (name, plan, created_at) = row.ok_or_else(|| OpError::NotFound(format!("workspace '{workspace_id}'")))?;
    Ok(Workspace {
        workspace_id: workspace_id.to_string(),
        name,
        plan,
        role: role.to_string(),
        created_at,
    })
}

pub async fn create(ctx: &Ctx, params: CreateParams) -> Result<Workspace, OpError> {
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
    let account_id: String = sqlx::query_scalar("SELECT account_id FROM workspaces WHERE id = $1")
        .bind(&caller.workspace_id)
        .fetch_one(&ctx.database().pool)
        .await?;
    let mut tx = ctx.database().begin_write().await?;
    let workspace_id = crate::accounts::create_workspace(&mut tx, &account_id, &user_id, &name).await?;
    tx.commit().await?;
    load(ctx, &workspace_id, "owner").await
}

pub async fn list(ctx: &Ctx, _params: ListParams) -> Result<WorkspaceList, OpError> {
    let caller = ctx.caller()?;
    // A key limited to its workspace sees only that one.
    let user_id = caller.user_id.as_ref().filter(|_| caller.scope == KeyScope::User);
    let rows: Vec<(String, String, String, i64, String)> = match user_id {
        Some(user_id) => {
            sqlx::query_as(
                "SELECT w.id, w.name, w.plan, w.created_at, m.role FROM workspaces w \
                 JOIN memberships m ON m.workspace_id = w.id \
                 WHERE m.user_id = $1 AND w.deleted_at IS NULL ORDER BY w.created_at, w.id",
            )
            .bind(user_id)
            .fetch_all(&ctx.database().pool)
            .await?
        }
        None => sqlx::query_as(
            "SELECT id, name, plan, created_at, CAST($2 AS TEXT) FROM workspaces WHERE id = $1 AND deleted_at IS NULL",
        )
        .bind(&caller.workspace_id)
        .bind(caller.role.as_str())
        .fetch_all(&ctx.database().pool)
        .await?,
    };
    Ok(WorkspaceList {
        workspaces: rows
            .into_iter()
            .map(|(workspace_id, name, plan, created_at, role)| Workspace {
                workspace_id,
                name,
                plan,
                role,
                created_at,
            })
            .collect(),
    })
}

pub async fn get(ctx: &Ctx, _params: Target) -> Result<Workspace, OpError> {
    let scope = ctx.scope();
    load(ctx, &scope.workspace_id, scope.role.as_str()).await
}

pub async fn rename(ctx: &Ctx, params: RenameParams) -> Result<Workspace, OpError> {
    let name = check_name(&params.name)?;
    let scope = ctx.scope();
    sqlx::query("UPDATE workspaces SET name = $1 WHERE id = $2")
        .bind(&name)
        .bind(&scope.workspace_id)
        .execute(&ctx.database().pool)
        .await?;
    load(ctx, &scope.workspace_id, scope.role.as_str()).await
}

/// Soft delete: the ledger keeps referencing the workspace, so its rows stay;
/// its keys are revoked, and every gateway drops them from its key cache.
pub async fn delete(ctx: &Ctx, _params: Target) -> Result<Deleted, OpError> {
    let workspace_id = ctx.scope().workspace_id.clone();
    let now = now_unix();
    let mut tx = ctx.database().begin_write().await?;
    sqlx::query("UPDATE workspaces SET deleted_at = $1 WHERE id = $2")
        .bind(now)
        .bind(&workspace_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE workspace_id = $2 AND revoked_at IS NULL")
        .bind(now)
        .bind(&workspace_id)
        .execute(&mut *tx)
        .await?;
    ctx.gateway
        .keys
        .commit_change(
            tx,
            crate::auth::KeyChange::Workspace {
                workspace_id: workspace_id.clone(),
            },
        )
        .await?;
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

#[derive(Serialize, JsonSchema)]
pub struct Namespace {
    pub namespace_id: String,
    pub name: String,
    pub workspace_id: String,
    pub created_at: i64,
}

#[derive(Serialize, JsonSchema)]
pub struct NamespaceList {
    pub namespaces: Vec<Namespace>,
}

fn check_namespace(name: &str) -> Result<(), OpError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(OpError::InvalidParams(format!(
            "namespace '{name}': use 1 to 64 lowercase letters, digits and '-'"
        )))
    }
}

pub async fn namespace_create(ctx: &Ctx, params: NamespaceParams) -> Result<Namespace, OpError> {
    check_namespace(&params.name)?;
    let workspace_id = ctx.scope().workspace_id.clone();
    let namespace = Namespace {
        namespace_id: new_id("ns"),
        name: params.name,
        workspace_id,
        created_at: now_unix(),
    };
    let mut tx = ctx.database().begin_write().await?;
    // Takes the workspace's row lock on Postgres (SQLite's BEGIN IMMEDIATE
    // already serialises writers), so concurrent creates on any gateway
    // cannot pass the limit together.
    sqlx::query("UPDATE workspaces SET name = name WHERE id = $1")
        .bind(&namespace.workspace_id)
        .execute(&mut *tx)
        .await?;
    let exists: Option<String> = sqlx::query_scalar("SELECT id FROM namespaces WHERE workspace_id = $1 AND name = $2")
        .bind(&namespace.workspace_id)
        .bind(&namespace.name)
        .fetch_optional(&mut *tx)
        .await?;
    if exists.is_some() {
        return Err(OpError::AlreadyExists(format!(
            "namespace '{}' already exists",
            namespace.name
        )));
    }
    let limit = ctx.gateway.config.control_plane.max_namespaces_per_workspace;
    if limit > 0 {
        let count: i64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM namespaces WHERE workspace_id = $1")
            .bind(&namespace.workspace_id)
            .fetch_one(&mut *tx)
            .await?;
        if count >= i64::from(limit) {
            return Err(OpError::ResourceExhausted(format!(
                "this workspace has {count} namespaces, the most it may have \
                 (control_plane.max_namespaces_per_workspace = {limit}); delete one first"
            )));
        }
    }
    sqlx::query("INSERT INTO namespaces (id, workspace_id, name, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&namespace.namespace_id)
        .bind(&namespace.workspace_id)
        .bind(&namespace.name)
        .bind(namespace.created_at)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(namespace)
}

pub async fn namespace_list(ctx: &Ctx, _params: Target) -> Result<NamespaceList, OpError> {
    let workspace_id = &ctx.scope().workspace_id;
    let rows: Vec<(String, String, i64)> =
        sqlx::query_as("SELECT id, name, created_at FROM namespaces WHERE workspace_id = $1 ORDER BY name")
            .bind(workspace_id)
            .fetch_all(&ctx.database().pool)
            .await?;
    Ok(NamespaceList {
        namespaces: rows
            .into_iter()
            .map(|(namespace_id, name, created_at)| Namespace {
                namespace_id,
                name,
                workspace_id: workspace_id.clone(),
                created_at,
            })
            .collect(),
    })
}

pub async fn namespace_delete(ctx: &Ctx, params: NamespaceParams) -> Result<Deleted, OpError> {
    let deleted = sqlx::query("DELETE FROM namespaces WHERE workspace_id = $1 AND name = $2")
        .bind(&ctx.scope().workspace_id)
        .bind(&params.name)
        .execute(&ctx.database().pool)
        .await?;
    if deleted.rows_affected() == 0 {
        return Err(OpError::NotFound(format!("namespace '{}'", params.name)));
    }
    Ok(Deleted { deleted: params.name })
}
