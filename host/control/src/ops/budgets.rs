//! Spend controls (`billing.limits.*`): the workspace's budget and its keys'
//! budgets, read with this period's spend and set (created, replaced or
//! removed) through the billing concern (`tollgate_billing::budgets`), which
//! owns `budgets` and `budget_usage`.

use chrono::SecondsFormat;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::workspaces::Target;
use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_billing::Billing;
use tollgate_billing::budgets::{self, Budget, BudgetSpec, Period};
use tollgate_core::money::Nanos;
use tollgate_identity::accounts::Accounts;

#[derive(Serialize, JsonSchema)]
pub struct BudgetShown {
    pub budget_id: String,
    /// `workspace` or `key`.
    pub scope: String,
    /// The key of a key budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// `daily` or `monthly` (UTC calendar day or month).
    pub period: Period,
    /// Exact decimal USD.
    pub limit_usd: String,
    /// The most one request's worst case may cost; null: no cap.
    pub max_request_usd: Option<String>,
    /// Percent of the limit at which a `dev.tollgate.budget.threshold.v1`
    /// event is sent, once per period.
    pub alert_thresholds: Vec<u32>,
    /// The current period, RFC 3339 (UTC): start inclusive, end exclusive.
    pub period_start: String,
    pub period_end: String,
    /// Billed this period, exact USD.
    pub spent_usd: String,
    /// Held by requests in flight (and other gateways' unused slices).
    pub held_usd: String,
    /// What is left: limit − spent − held, never below 0.
    pub remaining_usd: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Limits {
    pub workspace_id: String,
    pub plan: String,
    /// Whether the plan lets budgets be set (budgets already set are
    /// enforced either way).
    pub spend_controls: bool,
    /// The workspace's own budget; null: none.
    pub workspace: Option<BudgetShown>,
    /// Per-key budgets.
    pub keys: Vec<BudgetShown>,
}

async fn shown(billing: &Billing, budget: Budget) -> Result<BudgetShown, OpError> {
    let spend = billing.budgets();
    let now = spend.now();
    let (start, end) = budget.period.bounds(now);
    let usage = spend.usage(&budget, &budget.period.key(now)).await?;
    let remaining = budget
        .limit
        .0
        .saturating_sub(usage.spent.0)
        .saturating_sub(usage.held.0);
    let at = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    Ok(BudgetShown {
        budget_id: budget.id.clone(),
        scope: budget.scope().to_string(),
        key_id: budget.key_id.clone(),
        period: budget.period,
        limit_usd: budget.limit.usd_decimal(),
        max_request_usd: budget.max_request.map(Nanos::usd_decimal),
        alert_thresholds: budget.alert_thresholds.clone(),
        period_start: at(start),
        period_end: at(end),
        spent_usd: usage.spent.usd_decimal(),
        held_usd: usage.held.usd_decimal(),
        remaining_usd: Nanos(remaining.max(0)).usd_decimal(),
    })
}

/// The workspace's budget and its keys' budgets, with this period's spend.
pub async fn get(billing: &Billing, ctx: &Ctx, _params: Target) -> Result<Limits, OpError> {
    let workspace_id = &ctx.scope().workspace_id;
    let plan = billing.plan_of(workspace_id).await?;
    let mut limits = Limits {
        workspace_id: workspace_id.clone(),
        plan: plan.id.clone(),
        spend_controls: plan.spend_controls,
        workspace: None,
        keys: Vec::new(),
    };
    for budget in billing.budgets().list(workspace_id).await? {
        let shown = shown(billing, budget).await?;
        match shown.key_id {
            Some(_) => limits.keys.push(shown),
            None => limits.workspace = Some(shown),
        }
    }
    Ok(limits)
}

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Workspace,
    Key,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// `workspace` (the workspace's own budget) or `key` (with `key_id`).
    pub scope: Scope,
    /// A key of the workspace (scope `key`).
    #[serde(default)]
    pub key_id: Option<String>,
    /// Remove the budget instead of setting it.
    #[serde(default)]
    pub remove: bool,
    /// `daily` or `monthly` (UTC); required unless removing.
    #[serde(default)]
    pub period: Option<Period>,
    /// The limit per period, an exact decimal string; required unless removing.
    #[serde(default)]
    pub limit_usd: Option<String>,
    /// The most one request's worst case may cost, an exact decimal string.
    #[serde(default)]
    pub max_request_usd: Option<String>,
    /// Percent of the limit (1 to 100) at which an alert event is sent;
    /// default `[50, 80, 100]`, `[]` for none.
    #[serde(default)]
    pub alert_thresholds: Option<Vec<u32>>,
}

fn usd(field: &str, text: &str) -> Result<Nanos, OpError> {
    Nanos::from_usd(text).map_err(|e| OpError::InvalidParams(format!("{field}: {e}")))
}

/// Creates, replaces or removes the workspace's budget or a key's; answers
/// the workspace's budgets afterwards. Setting one needs a plan with spend
/// controls; removing one does not.
pub async fn set((billing, accounts): (&Billing, &Accounts), ctx: &Ctx, params: SetParams) -> Result<Limits, OpError> {
    let workspace_id = ctx.scope().workspace_id.clone();
    let key_id = match (params.scope, params.key_id) {
        (Scope::Workspace, None) => None,
        (Scope::Workspace, Some(_)) => {
            return Err(OpError::InvalidParams(
                "key_id is for scope 'key'; a workspace budget has none".into(),
            ));
        }
        (Scope::Key, None) => return Err(OpError::InvalidParams("scope 'key' needs key_id".into())),
        (Scope::Key, Some(key_id)) => Some(key_id),
    };
    let budgets = billing.budgets();
    if params.remove {
        if !budgets.remove(&workspace_id, key_id.as_deref()).await? {
            return Err(OpError::NotFound(match &key_id {
                Some(key) => format!("budget of key '{key}'"),
                None => format!("budget of workspace '{workspace_id}'"),
            }));
        }
        return get(billing, ctx, Target { workspace_id: None }).await;
    }
    let (Some(period), Some(limit)) = (params.period, params.limit_usd.as_deref()) else {
        return Err(OpError::InvalidParams(
            "period and limit_usd are required (or remove: true)".into(),
        ));
    };
    let limit = usd("limit_usd", limit)?;
    let max_request = params
        .max_request_usd
        .as_deref()
        .map(|m| usd("max_request_usd", m))
        .transpose()?;
    if max_request.is_some_and(|m| m.0 <= 0) {
        return Err(OpError::InvalidParams("max_request_usd must be above 0".into()));
    }
    let alert_thresholds = budgets::alert_thresholds(params.alert_thresholds).map_err(OpError::InvalidParams)?;
    let plan = billing.plan_of(&workspace_id).await?;
    if !plan.spend_controls {
        return Err(OpError::FailedPrecondition(format!(
            "the '{}' plan has no spend controls; move workspace '{workspace_id}' to a plan with spend_controls (`billing.plans.list`) to set budgets",
            plan.id
        )));
    }
    if let Some(key) = &key_id {
        let keys = accounts.keys(&workspace_id).await?;
        if !keys.iter().any(|k| &k.key_id == key) {
            return Err(OpError::NotFound(format!("key '{key}' in workspace '{workspace_id}'")));
        }
    }
    budgets
        .set(
            &workspace_id,
            BudgetSpec {
                key_id,
                period,
                limit,
                max_request,
                alert_thresholds,
            },
        )
        .await?;
    get(billing, ctx, Target { workspace_id: None }).await
}
