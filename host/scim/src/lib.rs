//! SCIM 2.0 provisioning (RFC 7643/7644) at `/scim/v2/`: a workspace's
//! identity provider (Okta, Entra ID, …) creates, updates, deactivates and
//! deletes its members, and manages groups whose names map to roles. It
//! authenticates with a bearer token of the workspace (`tokens.rs`, minted by
//! the control plane's `scim.tokens.create`).
//!
//! The SCIM tables hold what the provider says; memberships stay with
//! accounts. After every change [`Provisioning::sync`] makes the member's
//! membership agree: an active user is a member with the role their groups
//! map to, an inactive or deleted one is not. Removing a membership drops
//! the user's keys of the workspace from every gateway's key cache in the
//! same commit, so they get 401 at once, and console sessions re-read the
//! role on every call. SCIM never grants the owner role, never changes an
//! owner's role, and never removes the last owner. See docs/scim.md.
#![forbid(unsafe_code)]

mod groups;
mod http;
mod protocol;
pub mod tokens;
mod users;

use std::sync::Arc;

use axum::http::StatusCode;

pub use http::routes;
use protocol::ScimError;
pub use tokens::{NewToken, Settings, TokenInfo};
use tollgate_audit::{Actor, ActorKind, AuditLog, Change};
use tollgate_billing::Billing;
use tollgate_core::db::Database;
use tollgate_identity::accounts::{AccountError, Accounts};
use tollgate_identity::auth::permissions::Role;
use tollgate_web::server::Origins;

/// The SCIM service and its API for the control plane.
pub struct Provisioning {
    database: Database,
    accounts: Accounts,
    billing: Arc<Billing>,
    audit: AuditLog,
    origins: Arc<Origins>,
}

/// A request's SCIM connection: the workspace its token belongs to.
pub(crate) struct Connection {
    pub workspace_id: String,
    pub token_id: String,
}

impl Provisioning {
    pub fn new(database: Database, accounts: Accounts, billing: Arc<Billing>, origins: Arc<Origins>) -> Self {
        Self {
            audit: AuditLog::new(database.clone()),
            database,
            accounts,
            billing,
            origins,
        }
    }

    /// Mints a token for the workspace; `settings`, when given, replaces how
    /// its groups map to roles.
    pub async fn create_token(&self, workspace_id: &str, settings: Option<&Settings>) -> anyhow::Result<NewToken> {
        if let Some(settings) = settings {
            tokens::set_settings(&self.database, workspace_id, settings).await?;
        }
        Ok(tokens::create(&self.database, workspace_id).await?)
    }

    pub async fn tokens(&self, workspace_id: &str) -> anyhow::Result<(Vec<TokenInfo>, Settings)> {
        Ok((
            tokens::list(&self.database, workspace_id).await?,
            tokens::settings(&self.database, workspace_id).await?,
        ))
    }

    pub async fn revoke_token(&self, workspace_id: &str, token_id: &str) -> sqlx::Result<bool> {
        tokens::revoke(&self.database, workspace_id, token_id).await
    }

    /// Makes `user_id`'s membership agree with SCIM: an active user is a
    /// member with their groups' role; an inactive or deleted one is not.
    async fn sync(&self, workspace_id: &str, user_id: &str) -> Result<(), ScimError> {
        let scim_user = users::get(&self.database, workspace_id, user_id).await?;
        let member = self.accounts.member(workspace_id, user_id).await?;
        let Some(user) = scim_user.filter(|u| u.active) else {
            return match member {
                None => Ok(()),
                Some(member) => self.remove(workspace_id, user_id, member.role).await,
            };
        };
        let settings = tokens::settings(&self.database, workspace_id).await?;
        let groups = groups::of_user(&self.database, workspace_id, user_id).await?;
        let role = settings.role_for(groups.iter().map(|(_, name)| name.as_str()));
        match member {
            None => {
                let seats = self
                    .billing
                    .plan_of(workspace_id)
                    .await
                    .map_err(anyhow::Error::from)?
                    .seats;
                match self
                    .accounts
                    .add_member(workspace_id, user_id, &user.user_name, role, seats)
                    .await
                {
                    Ok(()) | Err(AccountError::AlreadyMember(_)) => Ok(()),
                    Err(AccountError::SeatLimit { count, limit }) => Err(ScimError::new(
                        StatusCode::FORBIDDEN,
                        None,
                        format!("the workspace has {count} members, all the seats its plan allows ({limit})"),
                    )),
                    Err(other) => Err(anyhow::Error::from(other).into()),
                }
            }
            Some(member) if member.role == Role::Owner || member.role == role => Ok(()),
            Some(_) => Ok(self
                .accounts
                .set_role(workspace_id, user_id, role)
                .await
                .map_err(anyhow::Error::from)?),
        }
    }

    async fn remove(&self, workspace_id: &str, user_id: &str, role: Role) -> Result<(), ScimError> {
        if role == Role::Owner && self.accounts.owner_count(workspace_id).await? <= 1 {
            return Err(ScimError::new(
                StatusCode::BAD_REQUEST,
                Some("mutability"),
                "this user is the workspace's last owner; make another owner first",
            ));
        }
        Ok(self
            .accounts
            .remove_member(workspace_id, user_id)
            .await
            .map_err(anyhow::Error::from)?)
    }

    /// Records a SCIM change in the audit log, as the token's provisioner.
    async fn audit(
        &self,
        connection: &Connection,
        op: &str,
        target: serde_json::Value,
        after: Option<serde_json::Value>,
    ) {
        let actor = Actor {
            key_id: Some(connection.token_id.clone()),
            ..Actor::of_kind(ActorKind::Provisioner)
        };
        let mut change = Change::new(op, actor)
            .workspace(connection.workspace_id.clone())
            .target(target);
        change.after = after;
        self.audit.record(change).await;
    }
}
