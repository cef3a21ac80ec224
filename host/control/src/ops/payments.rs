//! Wallet top-ups through the payment processor (`billing.topups.*`): open a
//! hosted checkout, and list the workspace's checkouts. The money moves when
//! the processor's webhook says it was paid (`tollgate_billing::payments`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_billing::Billing;
use tollgate_billing::payments::{CheckoutShown, Payments};

fn payments(billing: &Billing) -> Result<&Payments, OpError> {
    billing.payments().ok_or_else(|| {
        OpError::FailedPrecondition(
            "this gateway takes no payments: an operator configures [billing.stripe] (docs/billing.md, \"Payments\")"
                .into(),
        )
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TopupParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Exact decimal USD in whole cents, e.g. `"25"` or `"12.50"`, within the
    /// gateway's `[billing.topups]` bounds.
    pub amount_usd: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Topup {
    /// Where the payer completes the payment.
    pub checkout_url: Option<String>,
    /// The processor's Checkout Session id.
    pub session_id: Option<String>,
    pub checkout: CheckoutShown,
}

/// Opens a hosted checkout that credits the wallet once paid.
pub async fn topup_create(billing: &Billing, ctx: &Ctx, params: TopupParams) -> Result<Topup, OpError> {
    let payments = payments(billing)?;
    let by = ctx.caller.as_ref().map_or("", |c| c.key_id.as_str());
    let checkout = payments
        .create_topup(&ctx.scope().workspace_id, &params.amount_usd, by)
        .await?;
    Ok(Topup {
        checkout_url: checkout.checkout_url.clone(),
        session_id: checkout.session_id.clone(),
        checkout,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// At most this many, newest first (1 to 500, default 50).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
pub struct CheckoutList {
    pub checkouts: Vec<CheckoutShown>,
    /// Why new top-ups are refused, when a disputed payment holds them
    /// (until an operator releases it); `null` otherwise.
    pub topup_hold: Option<String>,
}

/// The workspace's top-ups and plan checkouts, newest first (also on a
/// gateway without a processor: they are in the database).
pub async fn topup_list(billing: &Billing, ctx: &Ctx, params: ListParams) -> Result<CheckoutList, OpError> {
    let limit = params.limit.unwrap_or(50);
    if limit == 0 || limit > 500 {
        return Err(OpError::InvalidParams("limit must be 1 to 500".into()));
    }
    let workspace_id = &ctx.scope().workspace_id;
    Ok(CheckoutList {
        checkouts: billing.checkouts(workspace_id, limit).await?,
        topup_hold: billing.topup_hold(workspace_id).await?,
    })
}
