//! SCIM connections (docs/scim.md): a workspace's bearer tokens for its
//! identity provider, and how the provider's groups map to roles.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_identity::auth::permissions::Role;
use tollgate_scim::{NewToken, Provisioning, Settings, TokenInfo};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Group display name → role (`admin`, `developer`, `viewer`); the
    /// highest of a user's groups applies. Replaces the mapping when given.
    #[serde(default)]
    pub group_roles: Option<BTreeMap<String, Role>>,
    /// The role of a user in no mapped group (default `developer`).
    #[serde(default)]
    pub default_role: Option<Role>,
}

#[derive(Serialize, JsonSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
    pub settings: Settings,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub token_id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Revoked {
    pub token_id: String,
    pub revoked: bool,
}

pub async fn create(scim: &Provisioning, ctx: &Ctx, params: CreateParams) -> Result<NewToken, OpError> {
    let workspace_id = &ctx.scope().workspace_id;
    let settings = match (params.group_roles, params.default_role) {
        (None, None) => None,
        (group_roles, default_role) => {
            let current = scim.tokens(workspace_id).await.map_err(OpError::Internal)?.1;
            Some(Settings {
                group_roles: group_roles.unwrap_or(current.group_roles),
                default_role: default_role.unwrap_or(current.default_role),
            })
        }
    };
    if let Some(settings) = &settings {
        let roles = settings.group_roles.values().chain([&settings.default_role]);
        if roles.into_iter().any(|role| *role == Role::Owner) {
            return Err(OpError::InvalidParams(
                "SCIM never grants the owner role: map groups to admin, developer or viewer".into(),
            ));
        }
    }
    scim.create_token(workspace_id, settings.as_ref())
        .await
        .map_err(OpError::Internal)
}

pub async fn list(scim: &Provisioning, ctx: &Ctx, _params: super::workspaces::Target) -> Result<TokenList, OpError> {
    let (tokens, settings) = scim
        .tokens(&ctx.scope().workspace_id)
        .await
        .map_err(OpError::Internal)?;
    Ok(TokenList { tokens, settings })
}

pub async fn revoke(scim: &Provisioning, ctx: &Ctx, params: RevokeParams) -> Result<Revoked, OpError> {
    if !scim.revoke_token(&ctx.scope().workspace_id, &params.token_id).await? {
        return Err(OpError::NotFound(format!("SCIM token '{}'", params.token_id)));
    }
    Ok(Revoked {
        token_id: params.token_id,
        revoked: true,
    })
}
