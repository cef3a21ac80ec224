//! Read-only operations on money: the wallet, the request log and one request's
//! trace. They reuse the ledger's own views.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::OpError;
use super::registry::Ctx;
use super::workspaces::Target;
use tollgate_core::money::Nanos;

#[derive(Serialize, JsonSchema)]
pub struct Wallet {
    pub workspace_id: String,
    pub plan: String,
    /// Posted balance minus pending holds, exact USD.
    pub available_usd: String,
    pub pending_usd: String,
    pub posted_usd: String,
}

pub async fn wallet(ctx: &Ctx, _params: Target) -> Result<Wallet, OpError> {
    let workspace_id = &ctx.scope().workspace_id;
    let balances = tollgate_ledger::wallet(ctx.database(), workspace_id).await?;
    let plan: String = sqlx::query_scalar("SELECT plan FROM workspaces WHERE id = $1")
        .bind(workspace_id)
        .fetch_one(&ctx.database().pool)
        .await?;
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
}

#[derive(Serialize, JsonSchema)]
pub struct UsagePage {
    pub entries: Vec<UsageEntry>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

type UsageRow = (
    String,
    String,
    String,
    Option<String>,
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
    i64,
);

/// Newest first. Request ids are time-ordered (UUID v7), so the cursor is the
/// last id shown and the next page is every id below it.
pub async fn usage(ctx: &Ctx, params: UsageParams) -> Result<UsagePage, OpError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(OpError::InvalidParams(format!("limit must be 1 to {MAX_PAGE}")));
    }
    let rows: Vec<UsageRow> = sqlx::query_as(
        "SELECT request_id, key_id, model, provider, outcome, status, input_tokens, output_tokens, cost_nano, \
         started_at_ms, duration_ms FROM request_log \
         WHERE workspace_id = $1 AND started_at_ms >= $2 AND started_at_ms < $3 \
         AND ($4 = '' OR key_id = $4) AND ($5 = '' OR request_id < $5) \
         ORDER BY request_id DESC LIMIT $6",
    )
    .bind(&ctx.scope().workspace_id)
    .bind(params.since_ms.unwrap_or(0))
    .bind(params.until_ms.unwrap_or(i64::MAX))
    .bind(params.key_id.unwrap_or_default())
    .bind(params.cursor.unwrap_or_default())
    .bind(i64::from(limit) + 1)
    .fetch_all(&ctx.database().pool)
    .await?;
    let more = rows.len() > limit as usize;
    let entries: Vec<UsageEntry> = rows
        .into_iter()
        .take(limit as usize)
        .map(
            |(request_id, key_id, model, provider, outcome, status, input, output, cost, started, duration)| {
                UsageEntry {
                    request_id,
                    key_id,
                    model,
                    provider,
                    outcome,
                    status,
                    input_tokens: input,
                    output_tokens: output,
                    cost_usd: Nanos(cost).usd_string(),
                    started_at_ms: started,
                    duration_ms: duration,
                }
            },
        )
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
pub async fn request(ctx: &Ctx, params: RequestParams) -> Result<Value, OpError> {
    let not_found = || OpError::NotFound(format!("request '{}'", params.request_id));
    let row = tollgate_ledger::request_log(ctx.database(), &params.request_id)
        .await?
        .ok_or_else(not_found)?;
    if row["workspace_id"].as_str() != Some(ctx.scope().workspace_id.as_str()) {
        return Err(not_found());
    }
    Ok(row)
}
