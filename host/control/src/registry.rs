//! The operation registry: the single source of truth for every control-plane
//! operation. Each op has a name (`workspaces.create`), JSON Schemas for its
//! params and result (derived from the very types the handler uses), an access
//! rule, and a handler. A handler takes only the concern APIs it names
//! ([`Uses`]) and its request's [`Ctx`]. Authentication and the permission
//! check happen here, once, before any handler runs; both the `SendMessage`
//! path and the extension methods go through [`run`].

use std::net::IpAddr;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::audit;
use super::error::OpError;
use super::ops::actors as act;
use super::ops::audit as audit_ops;
use super::ops::components as comp;
use super::ops::mcp_servers as remote;
use super::ops::packages as pkg;
use super::ops::scim as scim_ops;
use super::ops::{billing, budgets, members, payments, tool_policy, trust, workspaces};
use super::{ControlPlane, Limits, Signups};
use tollgate_audit::AuditLog;
use tollgate_billing::Billing;
use tollgate_hosted_actors::Actors;
use tollgate_identity::accounts::Accounts;
use tollgate_identity::auth::Principal;
use tollgate_identity::auth::permissions::{Permission, Role};
use tollgate_packages::Packages;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No key needed (`accounts.signup`).
    Public,
    /// Any valid key; acts on the key's user, not on one workspace.
    Authenticated,
    /// A workspace-scoped op: `params.workspace_id` (default: the key's own
    /// workspace) must be one the key's user belongs to, with this permission
    /// (and the key's own workspace, for a key limited to it).
    Workspace(Permission),
}

/// The workspace an op acts on and the caller's role there.
#[derive(Clone, Debug)]
pub struct Scope {
    pub workspace_id: String,
    pub role: Role,
}

/// What an operation knows of its request: who calls, the workspace it acts
/// in, and from where. The concerns it acts on come separately, as its first
/// parameter ([`Uses`]).
pub struct Ctx {
    pub caller: Option<Arc<Principal>>,
    pub scope: Option<Scope>,
    /// The client's address (behind trusted proxies, see `rate_limit::client_ip`),
    /// when known; per-client limits key on it.
    pub client_ip: Option<IpAddr>,
}

impl Ctx {
    pub fn caller(&self) -> Result<&Principal, OpError> {
        self.caller.as_deref().ok_or(OpError::Unauthenticated)
    }

    /// The resolved scope; present for every `Access::Workspace` op.
    pub fn scope(&self) -> &Scope {
        self.scope.as_ref().expect("workspace op without scope")
    }
}

/// What an operation takes of the control plane's state, named by the type
/// of its first parameter: one concern's API (`&Accounts`, `&Billing`,
/// `&tollgate_ledger::Views`, `&Packages`, `&components::Installs`,
/// `&Actors`), sign-up (`&Signups`), the limits (`&Limits`), or a pair
/// of these. Never the whole state, and never a database.
pub trait Uses<'a> {
    fn take(control: &'a ControlPlane) -> Self;
}

macro_rules! uses {
    ($($part:ty => |$control:ident| $take:expr;)*) => {$(
        impl<'a> Uses<'a> for &'a $part {
            fn take($control: &'a ControlPlane) -> Self {
                $take
            }
        }
    )*};
}

uses! {
    Accounts => |control| &control.apis.accounts;
    Billing => |control| &control.apis.billing;
    tollgate_ledger::Views => |control| &control.apis.ledger;
    Packages => |control| &control.apis.packages;
    tollgate_tools::Installs => |control| &control.apis.components;
    Actors => |control| &control.apis.actors;
    AuditLog => |control| &control.apis.audit;
    tollgate_scim::Provisioning => |control| &control.apis.scim;
    Signups => |control| &control.signups;
    Limits => |control| &control.limits;
}

impl<'a, A: Uses<'a>, B: Uses<'a>> Uses<'a> for (A, B) {
    fn take(control: &'a ControlPlane) -> Self {
        (A::take(control), B::take(control))
    }
}

type Handler = for<'a> fn(&'a ControlPlane, &'a Ctx, Value) -> BoxFuture<'a, Result<Value, OpError>>;

pub struct Op {
    pub name: &'static str,
    pub summary: &'static str,
    pub access: Access,
    pub params_schema: fn() -> Value,
    pub result_schema: fn() -> Value,
    handler: Handler,
}

impl Op {
    /// `workspaces.create` → `workspaces/create`.
    pub fn method(&self) -> String {
        self.name.replacen('.', "/", 1)
    }

    pub fn category(&self) -> &'static str {
        self.name.split_once('.').map_or(self.name, |(c, _)| c)
    }

    pub fn permission(&self) -> Option<Permission> {
        match self.access {
            Access::Workspace(permission) => Some(permission),
            _ => None,
        }
    }

    /// Runs the handler alone, with `ctx` already checked (reading the
    /// state a change is about to replace, for the audit log).
    pub(crate) async fn invoke(&self, control: &ControlPlane, ctx: &Ctx, params: Value) -> Result<Value, OpError> {
        (self.handler)(control, ctx, params).await
    }
}

/// Builds an [`Op`] from a typed handler
/// `async fn(impl Uses, &Ctx, P) -> Result<R, OpError>`.
macro_rules! op {
    ($name:literal, $access:expr, $summary:literal, $handler:path, $params:ty => $result:ty) => {{
        fn handler<'a>(
            control: &'a ControlPlane,
            ctx: &'a Ctx,
            params: Value,
        ) -> BoxFuture<'a, Result<Value, OpError>> {
            Box::pin(async move {
                let params: $params = serde_json::from_value(params)
                    .map_err(|e| OpError::InvalidParams(format!("invalid params for {}: {e}", $name)))?;
                let result: $result = $handler(Uses::take(control), ctx, params).await?;
                serde_json::to_value(result).map_err(|e| OpError::Internal(e.into()))
            })
        }
        Op {
            name: $name,
            summary: $summary,
            access: $access,
            params_schema: || serde_json::to_value(schemars::schema_for!($params)).unwrap_or_default(),
            result_schema: || serde_json::to_value(schemars::schema_for!($result)).unwrap_or_default(),
            handler,
        }
    }};
}

pub fn ops() -> &'static [Op] {
    use Access::*;
    use Permission::*;
    static OPS: std::sync::OnceLock<Vec<Op>> = std::sync::OnceLock::new();
    OPS.get_or_init(|| {
        vec![
            op!("accounts.signup", Public, "Create a user, a default workspace on the Free plan with a wallet, and the first API key (shown once).",
                workspaces::signup, workspaces::SignupParams => tollgate_identity::accounts::CreatedAccount),
            op!("workspaces.create", Authenticated, "Create a workspace owned by the caller.",
                workspaces::create, workspaces::CreateParams => workspaces::Workspace),
            op!("workspaces.list", Authenticated, "List the workspaces the caller belongs to.",
                workspaces::list, workspaces::ListParams => workspaces::WorkspaceList),
            op!("workspaces.get", Workspace(WorkspaceRead), "Show one workspace.",
                workspaces::get, workspaces::Target => workspaces::Workspace),
            op!("workspaces.rename", Workspace(WorkspaceRename), "Rename a workspace.",
                workspaces::rename, workspaces::RenameParams => workspaces::Workspace),
            op!("workspaces.delete", Workspace(WorkspaceDelete), "Delete a workspace and revoke its keys.",
                workspaces::delete, workspaces::Target => workspaces::Deleted),
            op!("workspaces.sso.set", Workspace(WorkspaceSso), "Require (or stop requiring) sign-in through an identity provider for the workspace's console sessions and for creating keys (owners; plans with sso).",
                workspaces::sso_set, workspaces::SsoParams => workspaces::Workspace),
            op!("namespaces.create", Workspace(NamespaceWrite), "Create a namespace in a workspace.",
                workspaces::namespace_create, workspaces::NamespaceParams => workspaces::Namespace),
            op!("namespaces.list", Workspace(NamespaceRead), "List a workspace's namespaces.",
                workspaces::namespace_list, workspaces::Target => workspaces::NamespaceList),
            op!("namespaces.delete", Workspace(NamespaceWrite), "Delete a namespace.",
                workspaces::namespace_delete, workspaces::NamespaceParams => workspaces::Deleted),
            op!("namespaces.keys.add", Workspace(NamespaceWrite), "Register a publisher's ed25519 public key for a namespace; packages signed with it verify.",
                trust::key_add, trust::KeyAddParams => tollgate_registry::NamespaceKey),
            op!("namespaces.keys.list", Workspace(NamespaceRead), "List a namespace's signing keys, revoked ones included.",
                trust::key_list, trust::KeyListParams => trust::KeyList),
            op!("namespaces.keys.revoke", Workspace(NamespaceWrite), "Revoke a namespace's signing key: its signatures no longer verify.",
                trust::key_revoke, trust::KeyParams => tollgate_registry::NamespaceKey),
            op!("workspaces.package-policy.get", Workspace(WorkspaceRead), "Show the workspace's package policy: the namespaces whose packages it installs only when signed.",
                trust::policy_get, trust::PolicyGetParams => trust::Policy),
            op!("workspaces.package-policy.set", Workspace(PolicyWrite), "Set the namespaces (or '*') whose packages the workspace installs only when signed by a registered, unrevoked key (owners and admins).",
                trust::policy_set, trust::PolicySetParams => trust::Policy),
            op!("workspaces.tool-policy.get", Workspace(WorkspaceRead), "Show the workspace's tool lists per role: the installs and tools its admins' and developers' keys may reach over MCP.",
                tool_policy::get, workspaces::Target => tool_policy::Policies),
            op!("workspaces.tool-policy.set", Workspace(PolicyWrite), "Limit (or stop limiting) what a role's keys may reach over MCP to listed installs and <install>__<tool> names (owners and admins).",
                tool_policy::set, tool_policy::SetParams => tool_policy::Policies),
            op!("members.add", Workspace(MemberWrite), "Add a signed-up user (by e-mail) to a workspace with a role.",
                members::add, members::AddParams => members::Member),
            op!("members.list", Workspace(MemberRead), "List a workspace's members and roles.",
                members::list, workspaces::Target => members::MemberList),
            op!("members.set-role", Workspace(MemberWrite), "Change a member's role.",
                members::set_role, members::SetRoleParams => members::Member),
            op!("members.remove", Workspace(MemberWrite), "Remove a member from a workspace.",
                members::remove, members::UserParams => workspaces::Deleted),
            op!("keys.create", Workspace(KeyWrite), "Create an API key for the caller in a workspace, optionally limited to listed installs and tools over MCP; the secret is shown once.",
                members::key_create, members::KeyCreateParams => members::CreatedKey),
            op!("keys.list", Workspace(KeyRead), "List a workspace's keys (hint and metadata only).",
                members::key_list, workspaces::Target => members::KeyList),
            op!("keys.revoke", Workspace(KeyWrite), "Revoke a key; the data plane refuses it at once.",
                members::key_revoke, members::KeyParams => members::RevokedKey),
            op!("keys.set-tools", Workspace(KeyWrite), "Replace a key's own list of installs and tools it may reach over MCP (null removes it); every gateway applies it at once.",
                members::key_set_tools, members::KeySetToolsParams => members::KeyTools),
            op!("wallet.get", Workspace(BillingRead), "Show a workspace's wallet balances (exact USD).",
                billing::wallet, workspaces::Target => billing::Wallet),
            op!("billing.plans.list", Authenticated, "List the plans: monthly requests, endpoints, seats, the gateway fee per request, the monthly price.",
                billing::plans, billing::NoParams => billing::PlanList),
            op!("billing.plan.get", Workspace(BillingRead), "Show the workspace's plan and what it allows.",
                billing::plan, workspaces::Target => billing::WorkspacePlan),
            op!("billing.plan.change", Workspace(BillingWrite), "Move the workspace to a plan (owners). A priced plan answers with a subscription checkout to pay at; it applies once paid.",
                billing::change_plan, billing::ChangeParams => billing::WorkspacePlan),
            op!("billing.topups.create", Workspace(PaymentWrite), "Open a hosted checkout that credits the wallet once paid (owners and admins).",
                payments::topup_create, payments::TopupParams => payments::Topup),
            op!("billing.topups.list", Workspace(BillingRead), "List the workspace's top-ups and plan checkouts, newest first.",
                payments::topup_list, payments::ListParams => payments::CheckoutList),
            op!("billing.usage.month", Workspace(UsageRead), "This calendar month's (UTC) model requests and spend against the plan's limit.",
                billing::usage_month, workspaces::Target => tollgate_billing::MonthUsage),
            op!("billing.limits.get", Workspace(BillingRead), "Show the workspace's budget and its keys' budgets (spend controls), with this period's spend, holds and what is left.",
                budgets::get, workspaces::Target => budgets::Limits),
            op!("billing.limits.set", Workspace(BudgetWrite), "Create, replace or remove the workspace's or a key's budget: a daily or monthly USD limit, a cap per request, alert thresholds (owners and admins; setting needs a plan with spend controls).",
                budgets::set, budgets::SetParams => budgets::Limits),
            op!("usage.list", Workspace(UsageRead), "List the request log, newest first, filtered by time and key.",
                billing::usage, billing::UsageParams => billing::UsagePage),
            op!("requests.get", Workspace(UsageRead), "Show one request's full trace, including attempts.",
                billing::request, billing::RequestParams => Value),
            op!("packages.search", Public, "Search registry packages by kind and text.",
                pkg::search, pkg::SearchParams => pkg::PackageList),
            op!("packages.get", Public, "Show a package and its versions.",
                pkg::get, pkg::PackageParams => pkg::PackageInfo),
            op!("packages.yank", Workspace(NamespaceWrite), "Hide a version from new installs.",
                pkg::yank, pkg::VersionParams => pkg::VersionState),
            op!("packages.unyank", Workspace(NamespaceWrite), "Undo a yank.",
                pkg::unyank, pkg::VersionParams => pkg::VersionState),
            op!("packages.deprecate", Workspace(NamespaceWrite), "Deprecate a version with a message.",
                pkg::deprecate, pkg::DeprecateParams => pkg::VersionState),
            op!("packages.publish", Workspace(NamespaceWrite), "Publish a package version: the manifest and its content (base64) in one message.",
                pkg::publish, pkg::PublishParams => pkg::PublishedVersion),
            op!("adapters.list", Authenticated, "List which adapter version serves each provider (operators).",
                pkg::list_installs, pkg::NoParams => pkg::InstallList),
            op!("adapters.install", Authenticated, "Serve a provider with an adapter version, without a restart (operators).",
                pkg::install, pkg::InstallParams => pkg::InstallEntry),
            op!("installs.create", Workspace(InstallWrite), "Install a tool server or skill into a workspace (semver range, name, settings, approved origins).",
                comp::create, comp::CreateParams => comp::Install),
            op!("installs.list", Workspace(InstallRead), "List a workspace's tool-server and skill installs.",
                comp::list, comp::ListParams => comp::InstallList),
            op!("installs.get", Workspace(InstallRead), "Show one install, its pinned dependencies and its tools.",
                comp::get, comp::NameParams => comp::Install),
            op!("installs.update", Workspace(InstallWrite), "Upgrade an install (resolve its range again) or change its settings and origins; calls in flight are not failed.",
                comp::update, comp::UpdateParams => comp::Install),
            op!("installs.delete", Workspace(InstallWrite), "Uninstall; its tools disappear from MCP at once.",
                comp::delete, comp::NameParams => comp::Uninstalled),
            op!("guardrails.create", Workspace(InstallWrite), "Install a guardrail package with its placement: routes, keys, models, order and mode (enforce or monitor).",
                comp::create_guardrail, comp::CreateParams => comp::Install),
            op!("guardrails.list", Workspace(InstallRead), "List a workspace's guardrails in the order they run on a request.",
                comp::list_guardrails, comp::ListParams => comp::InstallList),
            op!("guardrails.delete", Workspace(InstallWrite), "Remove a guardrail; the next request runs without it.",
                comp::delete_guardrail, comp::NameParams => comp::Uninstalled),
            op!("mcp_servers.create", Workspace(InstallWrite), "Add a remote MCP server (streamable HTTP) to a workspace: its tools join /v1/mcp as <name>__<tool>; auth is none, a static header, or OAuth 2.1 client credentials (the secret sealed, the token held by the gateway); secrets are never shown.",
                remote::create, remote::CreateParams => tollgate_tools::remote::ServerShown),
            op!("mcp_servers.list", Workspace(InstallRead), "List a workspace's remote MCP servers (credential headers, never their values).",
                remote::list, comp::ListParams => remote::ServerList),
            op!("mcp_servers.delete", Workspace(InstallWrite), "Remove a remote MCP server; its tools leave /v1/mcp at once.",
                remote::delete, comp::NameParams => comp::Uninstalled),
            op!("actors.compile", Workspace(ActorRead), "Compile an actor's YAML (and its sub-actor files) to its IR and id; nothing is stored.",
                act::compile, act::SourceParams => act::CompiledActor),
            op!("actors.publish", Workspace(ActorWrite), "Compile and publish an actor (sub-actors first) as an immutable registry package; answers its id.",
                act::publish, act::PublishParams => tollgate_hosted_actors::publish::PublishedActor),
            op!("actors.get", Workspace(ActorRead), "Show a published actor and its IR.",
                act::get, act::IdParams => act::ActorShown),
            op!("actors.list", Workspace(ActorRead), "List the actors a workspace published.",
                act::list, act::WorkspaceParams => act::ActorList),
            op!("deployments.create", Workspace(ActorWrite), "Bind POST /v1/actors/{namespace}/{name} to an actor id (again: move it; runs in flight finish on the old id).",
                act::deploy, act::DeployParams => act::DeploymentShown),
            op!("deployments.list", Workspace(ActorRead), "List a workspace's deployments and its limit.",
                act::deployments, act::WorkspaceParams => act::DeploymentList),
            op!("deployments.get", Workspace(ActorRead), "Show one deployment.",
                act::deployment, act::DeploymentParams => act::DeploymentShown),
            op!("deployments.delete", Workspace(ActorWrite), "Delete a deployment; its URL answers 404 at once.",
                act::undeploy, act::DeploymentParams => act::Undeployed),
            op!("audit.list", Workspace(AuditRead), "List the workspace's audit log, newest first: every control-plane change, sign-in and payment, with actor, target, before and after (owners and admins).",
                audit_ops::list, audit_ops::ListParams => audit_ops::AuditPage),
            op!("scim.tokens.create", Workspace(ProvisioningWrite), "Mint a SCIM bearer token for the workspace's identity provider (shown once), optionally setting how its groups map to roles (owners).",
                scim_ops::create, scim_ops::CreateParams => tollgate_scim::NewToken),
            op!("scim.tokens.list", Workspace(ProvisioningWrite), "List the workspace's SCIM tokens (hints only) and its group-to-role mapping (owners).",
                scim_ops::list, workspaces::Target => scim_ops::TokenList),
            op!("scim.tokens.revoke", Workspace(ProvisioningWrite), "Revoke a SCIM token; the identity provider's next request with it gets 401 (owners).",
                scim_ops::revoke, scim_ops::RevokeParams => scim_ops::Revoked),
            op!("runs.get", Workspace(ActorRead), "Show an actor run: its signed provenance trail, the signature and the public key.",
                act::run, act::RunParams => act::RunShown),
        ]
    })
}

pub fn by_name(name: &str) -> Option<&'static Op> {
    ops().iter().find(|op| op.name == name)
}

pub fn by_method(method: &str) -> Option<&'static Op> {
    ops().iter().find(|op| op.method() == method)
}

/// Runs `op`: authentication, then the workspace scope and permission, then the
/// handler with validated params.
pub async fn run(
    op: &Op,
    control: &ControlPlane,
    caller: Option<Arc<Principal>>,
    client_ip: Option<IpAddr>,
    params: Value,
) -> Result<Value, OpError> {
    let params = match params {
        Value::Null => Value::Object(Default::default()),
        Value::Object(map) => Value::Object(map),
        _ => return Err(OpError::InvalidParams("params must be an object".into())),
    };
    let mut ctx = Ctx {
        caller,
        scope: None,
        client_ip,
    };
    let checked = check(op, control, &mut ctx, &params).await;
    let before = match (&checked, audit::changes_state(op)) {
        (Ok(()), true) => audit::before(control, &ctx, op, &params).await,
        _ => None,
    };
    let outcome = match checked {
        Ok(()) => (op.handler)(control, &ctx, params.clone()).await,
        Err(error) => Err(error),
    };
    if let Some(change) = audit::change(op, &ctx, &params, before, &outcome) {
        control.apis.audit.record(change).await;
    }
    outcome
}

/// Authentication, then the workspace scope and permission; sets the scope
/// on `ctx`.
async fn check(op: &Op, control: &ControlPlane, ctx: &mut Ctx, params: &Value) -> Result<(), OpError> {
    match op.access {
        Access::Public => {}
        Access::Authenticated => {
            ctx.caller()?;
        }
        Access::Workspace(permission) => {
            let target = match params.get("workspace_id") {
                None | Some(Value::Null) => None,
                Some(Value::String(id)) => Some(id.clone()),
                Some(_) => return Err(OpError::InvalidParams("workspace_id must be a string".into())),
            };
            let scope = resolve_scope(&control.apis.accounts, ctx, target).await?;
            refuse_key_sessions_under_sso(&control.apis.accounts, ctx, &scope).await?;
            if !scope.role.allows(permission) {
                return Err(OpError::PermissionDenied(format!(
                    "role '{}' lacks permission '{}' needed by {}",
                    scope.role.as_str(),
                    permission.as_str(),
                    op.name
                )));
            }
            ctx.scope = Some(scope);
        }
    }
    Ok(())
}

/// In a workspace that requires SSO, a console session made with an API key
/// may not act: only one signed in through the identity provider may. The
/// key itself, used directly, keeps working until revoked.
async fn refuse_key_sessions_under_sso(accounts: &Accounts, ctx: &Ctx, scope: &Scope) -> Result<(), OpError> {
    let caller = ctx.caller()?;
    if caller.console_session.is_none() || caller.signed_in_with_oidc() {
        return Ok(());
    }
    if accounts.requires_sso(&scope.workspace_id).await? {
        return Err(OpError::PermissionDenied(SSO_REQUIRED.into()));
    }
    Ok(())
}

/// Why a caller not signed in through the identity provider is refused in a
/// workspace that requires SSO.
pub const SSO_REQUIRED: &str = "sso_required: this workspace requires signing in through its identity provider (OIDC)";

/// The caller's role in `target` (default: the key's workspace). A workspace the
/// user does not belong to, a deleted one, or (for a key limited to its own
/// workspace) any other one is "not found".
async fn resolve_scope(accounts: &Accounts, ctx: &Ctx, target: Option<String>) -> Result<Scope, OpError> {
    let caller = ctx.caller()?;
    let workspace_id = target.unwrap_or_else(|| caller.workspace_id.clone());
    let not_found = || OpError::NotFound(format!("workspace '{workspace_id}'"));
    if caller.scope == tollgate_identity::auth::KeyScope::Workspace && workspace_id != caller.workspace_id {
        return Err(not_found());
    }
    let Some(user_id) = &caller.user_id else {
        // A key from before users existed acts as owner of its own workspace only.
        return if workspace_id == caller.workspace_id && accounts.workspace_is_live(&workspace_id).await? {
            Ok(Scope {
                workspace_id,
                role: caller.role,
            })
        } else {
            Err(not_found())
        };
    };
    let role = accounts.role_in(&workspace_id, user_id).await?.ok_or_else(not_found)?;
    Ok(Scope { workspace_id, role })
}
