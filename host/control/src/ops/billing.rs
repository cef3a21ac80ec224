//! Operations on money: the wallet, the request log and one request's trace,
//! read through the ledger's own views (`tollgate_ledger`), which own
//! `wallets` and `request_log`; and plans (`billing.*`: the plans, a
//! workspace's plan and its change, the month's usage against it) through the
//! billing concern (`tollgate_billing`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::workspaces::Target;
use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_billing::Billing;
use tollgate_hosted_actors::Actors;
use tollgate_identity::accounts::Accounts;
use tollgate_ledger::Views;

#[derive(Serialize, JsonSchema)]
pub struct Wallet {
    pub workspace_id: String,
    pub plan: String,
    /// Posted balance minus pending holds, exact USD.
    pub available_usd: String,
    pub pending_usd: String,
    pub posted_usd: String,
}

pub async fn wallet((ledger, accounts): (&Views, &Accounts), ctx: &Ctx, _params: Target) -> Result<Wallet, OpError> {
    let workspace_id = &ctx.scope().workspace_id;
    let balances = ledger.wallet(workspace_id).await?;
    let plan = accounts.plan(workspace_id).await?;
    Ok(Wallet {
        workspace_id: balances.workspace_id,
        plan,
        available_usd: balances.available_usd,
        pending_usd: balances.pending_usd,
        posted_usd: balances.posted_usd,
    })
}

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 500;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Only requests started at or after this time (Unix milliseconds).
    #[serde(default)]
    pub since_ms: Option<i64>,
    /// Only requests started before this time (Unix milliseconds).
    #[serde(default)]
    pub until_ms: Option<i64>,
    /// Only requests made with this key.
    #[serde(default)]
    pub key_id: Option<String>,
    /// Page size, 1 to 500 (default 50).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct UsageEntry {
    pub request_id: String,
    pub key_id: String,
    pub model: String,
    pub provider: Option<String>,
    pub outcome: String,
    pub status: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_usd: String,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// `chat`, `tool_call`, `skill_run`, `actor_run` or `budget_alert` (a
    /// spend-control threshold crossed; docs/billing.md).
    pub kind: String,
    /// The request this one ran inside (a skill's model and tool calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_request_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct UsagePage {
    pub entries: Vec<UsageEntry>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// Newest first. Request ids are time-ordered (UUID v7), so the cursor is the
/// last id shown and the next page is every id below it.
pub async fn usage(ledger: &Views, ctx: &Ctx, params: UsageParams) -> Result<UsagePage, OpError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(OpError::InvalidParams(format!("limit must be 1 to {MAX_PAGE}")));
    }
    let query = tollgate_ledger::UsageQuery {
        workspace_id: ctx.scope().workspace_id.clone(),
        since_ms: params.since_ms,
        until_ms: params.until_ms,
        key_id: params.key_id,
        before_request_id: params.cursor,
        limit: limit + 1,
    };
    let rows = ledger.usage(&query).await?;
    let more = rows.len() > limit as usize;
    let entries: Vec<UsageEntry> = rows
        .into_iter()
        .take(limit as usize)
        .map(|row| UsageEntry {
            request_id: row.request_id,
            key_id: row.key_id,
            model: row.model,
            provider: row.provider,
            outcome: row.outcome,
            status: row.status,
            input_tokens: row.input_tokens,
            output_tokens: row.output_tokens,
            cost_usd: row.cost.usd_string(),
            started_at_ms: row.started_at_ms,
            duration_ms: row.duration_ms,
            kind: row.kind,
            parent_request_id: row.parent_request_id,
        })
        .collect();
    let next_cursor = more.then(|| entries.last().map(|e| e.request_id.clone())).flatten();
    Ok(UsagePage { entries, next_cursor })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// `service.request_id` of a data-plane answer.
    pub request_id: String,
}

/// The request-log trace, including attempts. Another workspace's request is
/// "not found".
pub async fn request((ledger, actors): (&Views, &Actors), ctx: &Ctx, params: RequestParams) -> Result<Value, OpError> {
    let not_found = || OpError::NotFound(format!("request '{}'", params.request_id));
    let row = ledger.request_log(&params.request_id).await?.ok_or_else(not_found)?;
    if row["workspace_id"].as_str() != Some(ctx.scope().workspace_id.as_str()) {
        return Err(not_found());
    }
    let mut row = row;
    // An actor run's trace is its signed provenance trail.
    if row["kind"] == "actor_run" {
        let run = super::actors::run(
            actors,
            ctx,
            super::actors::RunParams {
                workspace_id: None,
                run_id: params.request_id.clone(),
            },
        )
        .await?;
        row["provenance"] = serde_json::to_value(run).map_err(|e| OpError::Internal(e.into()))?;
    }
    Ok(row)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[derive(Serialize, JsonSchema)]
pub struct PlanList {
    pub plans: Vec<tollgate_billing::plans::PlanShown>,
}

/// Every plan this gateway defines (built-in and operator-added).
pub async fn plans(billing: &Billing, _ctx: &Ctx, _params: NoParams) -> Result<PlanList, OpError> {
    Ok(PlanList {
        plans: billing.plans().all().map(|plan| plan.shown()).collect(),
    })
}

#[derive(Serialize, JsonSchema)]
pub struct WorkspacePlan {
    pub workspace_id: String,
    /// The plan the workspace is on now.
    pub plan: tollgate_billing::plans::PlanShown,
    /// A change to a priced plan: the hosted checkout to pay for it at
    /// (`checkout_url`). The plan applies once the processor says the
    /// subscription is active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkout: Option<tollgate_billing::payments::CheckoutShown>,
}

pub async fn plan(billing: &Billing, ctx: &Ctx, _params: Target) -> Result<WorkspacePlan, OpError> {
    let workspace_id = &ctx.scope().workspace_id;
    let plan = billing.plan_of(workspace_id).await?;
    Ok(WorkspacePlan {
        workspace_id: workspace_id.clone(),
        plan: plan.shown(),
        checkout: None,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// A plan id from `billing.plans.list`.
    pub plan: String,
}

/// Moves the workspace to a plan with no monthly price at once. A priced plan
/// is bought through the payment processor: this opens a subscription
/// checkout, and the plan applies when its webhook says it is active.
pub async fn change_plan(billing: &Billing, ctx: &Ctx, params: ChangeParams) -> Result<WorkspacePlan, OpError> {
    let workspace_id = &ctx.scope().workspace_id;
    let Some(plan) = billing.plans().get(&params.plan) else {
        return Err(OpError::InvalidParams(format!(
            "no plan '{}'; the plans are: {}",
            params.plan,
            billing.plans().ids()
        )));
    };
    if plan.monthly_price.0 != 0 {
        let Some(payments) = billing.payments() else {
            return Err(OpError::FailedPrecondition(format!(
                "plan '{}' costs {} USD a month, and this gateway takes no payments ([billing.stripe] is not configured); an operator can move workspace '{workspace_id}' onto it with `tollgate admin plan set --workspace WORKSPACE --plan {}`",
                plan.id,
                plan.monthly_price.usd_decimal(),
                plan.id
            )));
        };
        let by = ctx.caller.as_ref().map_or("", |c| c.key_id.as_str());
        let checkout = payments.subscribe(workspace_id, plan, by).await?;
        let current = billing.plan_of(workspace_id).await?;
        return Ok(WorkspacePlan {
            workspace_id: workspace_id.clone(),
            plan: current.shown(),
            checkout: Some(checkout),
        });
    }
    let plan = billing.set_plan(workspace_id, &params.plan).await?;
    Ok(WorkspacePlan {
        workspace_id: workspace_id.clone(),
        plan: plan.shown(),
        checkout: None,
    })
}

/// This month's (UTC) requests and spend against the plan.
pub async fn usage_month(
    billing: &Billing,
    ctx: &Ctx,
    _params: Target,
) -> Result<tollgate_billing::MonthUsage, OpError> {
    Ok(billing.month_usage(&ctx.scope().workspace_id).await?)
}
