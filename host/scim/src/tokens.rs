//! A workspace's SCIM connection: its bearer tokens (only their SHA-256 is
//! kept; the secret is shown once) and how its identity provider's groups
//! map to roles. Owner of `scim_tokens` and `scim_settings`.

use std::collections::BTreeMap;

use rand::Rng;
use rand::distr::Alphanumeric;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use tollgate_core::db::{Database, new_id, now_ms};
use tollgate_identity::auth::permissions::Role;

const TOKEN_PREFIX: &str = "tg_scim_";

/// How groups become roles: a member's role is the highest one mapped from
/// their groups' display names (compared without case), else `default_role`.
/// SCIM never grants or takes away the owner role.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Settings {
    pub group_roles: BTreeMap<String, Role>,
    pub default_role: Role,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            group_roles: BTreeMap::new(),
            default_role: Role::Developer,
        }
    }
}

impl Settings {
    /// The role for someone in `groups` (display names).
    pub fn role_for<'a>(&self, groups: impl IntoIterator<Item = &'a str>) -> Role {
        let rank = |role: Role| Role::ALL.iter().position(|r| *r == role).unwrap_or(usize::MAX);
        groups
            .into_iter()
            .filter_map(|group| {
                self.group_roles
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(group))
                    .map(|(_, role)| *role)
            })
            .min_by_key(|role| rank(*role))
            .unwrap_or(self.default_role)
    }
}

/// A token as listed (never its secret).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct TokenInfo {
    pub token_id: String,
    pub hint: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

/// A new token: `token` is shown once and kept nowhere.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct NewToken {
    pub token_id: String,
    pub token: String,
    pub hint: String,
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub async fn create(database: &Database, workspace_id: &str) -> sqlx::Result<NewToken> {
    let random: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(40)
        .map(char::from)
        .collect();
    let token = format!("{TOKEN_PREFIX}{random}");
    let hint = format!("{TOKEN_PREFIX}{}…{}", &random[..4], &random[random.len() - 4..]);
    let token_id = new_id("scimtok");
    sqlx::query(
        "INSERT INTO scim_tokens (id, workspace_id, token_hash, hint, created_at_ms) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&token_id)
    .bind(workspace_id)
    .bind(hash(&token))
    .bind(&hint)
    .bind(now_ms())
    .execute(&database.pool)
    .await?;
    Ok(NewToken { token_id, token, hint })
}

pub async fn list(database: &Database, workspace_id: &str) -> sqlx::Result<Vec<TokenInfo>> {
    let rows: Vec<(String, String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT id, hint, created_at_ms, revoked_at_ms FROM scim_tokens WHERE workspace_id = $1 ORDER BY created_at_ms, id",
    )
    .bind(workspace_id)
    .fetch_all(&database.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(token_id, hint, created_at_ms, revoked_at_ms)| TokenInfo {
            token_id,
            hint,
            created_at_ms,
            revoked_at_ms,
        })
        .collect())
}

/// Revokes a live token of the workspace; whether there was one.
pub async fn revoke(database: &Database, workspace_id: &str, token_id: &str) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE scim_tokens SET revoked_at_ms = $1 WHERE id = $2 AND workspace_id = $3 AND revoked_at_ms IS NULL",
    )
    .bind(now_ms())
    .bind(token_id)
    .bind(workspace_id)
    .execute(&database.pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The workspace and token id a presented token stands for, if live and
/// its workspace too.
pub async fn resolve(database: &Database, token: &str) -> sqlx::Result<Option<(String, String)>> {
    if !token.starts_with(TOKEN_PREFIX) {
        return Ok(None);
    }
    sqlx::query_as(
        "SELECT t.workspace_id, t.id FROM scim_tokens t JOIN workspaces w ON w.id = t.workspace_id \
         WHERE t.token_hash = $1 AND t.revoked_at_ms IS NULL AND w.deleted_at IS NULL",
    )
    .bind(hash(token))
    .fetch_optional(&database.pool)
    .await
}

pub async fn settings(database: &Database, workspace_id: &str) -> anyhow::Result<Settings> {
    let row: Option<(String, String)> =
        sqlx::query_as("SELECT group_roles, default_role FROM scim_settings WHERE workspace_id = $1")
            .bind(workspace_id)
            .fetch_optional(&database.pool)
            .await?;
    let Some((group_roles, default_role)) = row else {
        return Ok(Settings::default());
    };
    Ok(Settings {
        group_roles: serde_json::from_str(&group_roles)?,
        default_role: Role::parse(&default_role).unwrap_or(Role::Developer),
    })
}

pub async fn set_settings(database: &Database, workspace_id: &str, settings: &Settings) -> anyhow::Result<()> {
    let _turn = database.write_turn().await;
    sqlx::query(
        "INSERT INTO scim_settings (workspace_id, group_roles, default_role) VALUES ($1, $2, $3) \
         ON CONFLICT (workspace_id) DO UPDATE SET group_roles = $2, default_role = $3",
    )
    .bind(workspace_id)
    .bind(serde_json::to_string(&settings.group_roles)?)
    .bind(settings.default_role.as_str())
    .execute(&database.pool)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_mapped_role_wins_and_names_ignore_case() {
        let settings = Settings {
            group_roles: BTreeMap::from([
                ("Tollgate Admins".to_string(), Role::Admin),
                ("Viewers".to_string(), Role::Viewer),
            ]),
            default_role: Role::Developer,
        };
        assert_eq!(settings.role_for(["viewers"]), Role::Viewer);
        assert_eq!(settings.role_for(["Viewers", "TOLLGATE ADMINS"]), Role::Admin);
        assert_eq!(settings.role_for(["Engineering"]), Role::Developer);
        assert_eq!(settings.role_for([]), Role::Developer);
    }
}
