//! Payments through a processor's hosted checkout (Stripe Checkout; docs/
//! billing.md, "Payments"): wallet top-ups and subscriptions to priced plans.
//!
//! The gateway records every checkout before it asks the processor to open
//! it, and credits or changes anything only for a checkout it recorded.
//! Money moves only in a webhook (`events.rs`): a signed event is handled in
//! one transaction with its dedupe row, so a redelivery, a concurrent
//! delivery or a late one changes nothing twice.

pub mod config;
mod events;
pub mod http;
mod signature;
mod store;
mod stripe_api;

use std::sync::Arc;

pub use config::{StripeConfig, TopupConfig};
pub use events::{Handled, WebhookError};
pub use store::CheckoutShown;

use crate::plans::Plan;
use store::{CENT, NewCheckout};
use stripe_api::{NewSession, SessionKind, StripeApi};
use tollgate_core::db::{Database, new_id};
use tollgate_core::money::Nanos;

const CURRENCY: &str = "usd";

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Processor(#[from] stripe_api::ApiError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The payments concern: `None` in [`crate::Billing`] until
/// `[billing.stripe] secret_key` is set.
pub struct Payments {
    api: StripeApi,
    config: StripeConfig,
    secrets: Arc<[String]>,
    min: Nanos,
    max: Nanos,
    database: Database,
}

impl Payments {
    pub fn new(stripe: &StripeConfig, topups: &TopupConfig, database: Database) -> anyhow::Result<Option<Self>> {
        let Some(secret_key) = stripe.secret_key.as_deref().filter(|k| !k.is_empty()) else {
            return Ok(None);
        };
        let Some(webhook_secret) = stripe.webhook_secret.as_deref().filter(|k| !k.is_empty()) else {
            anyhow::bail!(
                "billing.stripe.secret_key is set but billing.stripe.webhook_secret is not: without it no payment could ever be credited (set it, or TOLLGATE_BILLING__STRIPE__WEBHOOK_SECRET, to the endpoint's signing secret)"
            );
        };
        let amount = |key: &str, text: &str| -> anyhow::Result<Nanos> {
            let value = Nanos::from_usd(text).map_err(|e| anyhow::anyhow!("billing.topups.{key}: {e}"))?;
            anyhow::ensure!(
                value.0 > 0 && value.0 % CENT == 0,
                "billing.topups.{key} must be a positive amount in whole cents"
            );
            Ok(value)
        };
        let (min, max) = (amount("min_usd", &topups.min_usd)?, amount("max_usd", &topups.max_usd)?);
        anyhow::ensure!(min <= max, "billing.topups.min_usd is above max_usd");
        let mut secrets = vec![webhook_secret.to_string()];
        secrets.extend(
            stripe
                .previous_webhook_secrets
                .iter()
                .filter(|s| !s.is_empty())
                .cloned(),
        );
        Ok(Some(Self {
            api: StripeApi::new(&stripe.api_base, secret_key)?,
            config: stripe.clone(),
            secrets: secrets.into(),
            min,
            max,
            database,
        }))
    }

    /// Opens a Checkout Session that credits `amount_usd` to the workspace's
    /// wallet once paid.
    pub async fn create_topup(
        &self,
        workspace_id: &str,
        amount_usd: &str,
        created_by: &str,
    ) -> Result<CheckoutShown, PaymentError> {
        let amount = Nanos::from_usd(amount_usd.trim())
            .map_err(|e| PaymentError::Invalid(format!("amount_usd '{amount_usd}': {e}")))?;
        if amount.0 % CENT != 0 {
            return Err(PaymentError::Invalid(format!(
                "amount_usd '{amount_usd}' has fractions of a cent; top-ups are in whole cents"
            )));
        }
        if amount < self.min || amount > self.max {
            return Err(PaymentError::Invalid(format!(
                "a top-up is {} to {} USD; {} USD is outside that",
                self.min.usd_decimal(),
                self.max.usd_decimal(),
                amount.usd_decimal()
            )));
        }
        if let Some(reason) = store::held(&self.database, workspace_id).await? {
            return Err(PaymentError::Refused(format!(
                "top-ups of workspace '{workspace_id}' are held: {reason}; an operator can release them with `tollgate admin payments release --workspace {workspace_id}`"
            )));
        }
        let product_name = format!("Tollgate wallet top-up ({} USD)", amount.usd_decimal());
        self.open(workspace_id, SessionKind::Topup, amount, product_name, created_by)
            .await
    }

    /// Opens a subscription Checkout Session for a priced plan; the plan
    /// applies when the processor says the subscription is active.
    pub async fn subscribe(
        &self,
        workspace_id: &str,
        plan: &Plan,
        created_by: &str,
    ) -> Result<CheckoutShown, PaymentError> {
        if plan.monthly_price.0 <= 0 || plan.monthly_price.0 % CENT != 0 {
            return Err(PaymentError::Invalid(format!(
                "plan '{}' has no monthly price in whole cents to subscribe to",
                plan.id
            )));
        }
        let product_name = format!("Tollgate {} plan", plan.id);
        self.open(
            workspace_id,
            SessionKind::Subscription { plan: &plan.id },
            plan.monthly_price,
            product_name,
            created_by,
        )
        .await
    }

    async fn open(
        &self,
        workspace_id: &str,
        kind: SessionKind<'_>,
        amount: Nanos,
        product_name: String,
        created_by: &str,
    ) -> Result<CheckoutShown, PaymentError> {
        let id = new_id("co");
        let (kind_name, plan) = match &kind {
            SessionKind::Topup => ("topup", None),
            SessionKind::Subscription { plan } => ("subscription", Some(*plan)),
        };
        let amount_cents = amount.0 / CENT;
        store::insert(
            &self.database,
            &NewCheckout {
                id: &id,
                workspace_id,
                kind: kind_name,
                // A subscription credits nothing: its price pays for the plan.
                amount_nano: if plan.is_some() { 0 } else { amount.0 },
                amount_cents,
                currency: CURRENCY,
                plan,
                created_by,
            },
        )
        .await?;
        let opened = self
            .api
            .create_session(&NewSession {
                checkout_id: &id,
                workspace_id,
                kind,
                amount_cents,
                currency: CURRENCY,
                product_name,
                success_url: &self.config.success_url,
                cancel_url: &self.config.cancel_url,
            })
            .await;
        let session = match opened {
            Ok(session) => session,
            Err(error) => {
                // Refused outright: no session exists. Unreachable: one may,
                // and its webhook adopts this row by the id in its metadata.
                if matches!(error, stripe_api::ApiError::Refused { .. }) {
                    store::create_failed(&self.database, &id).await?;
                }
                return Err(error.into());
            }
        };
        if session.amount_total.is_some_and(|total| total != amount_cents)
            || session
                .currency
                .as_deref()
                .is_some_and(|c| !c.eq_ignore_ascii_case(CURRENCY))
        {
            tracing::error!(checkout = %id, session = %session.id, "the processor opened a session for another amount");
        }
        store::opened(&self.database, &id, &session.id, session.url.as_deref()).await?;
        Ok(store::get(&self.database, &id).await?.shown())
    }

    /// Verifies and handles one webhook delivery.
    pub async fn webhook(
        &self,
        signature: Option<&str>,
        payload: &[u8],
        plans: &crate::plans::Plans,
    ) -> Result<Handled, WebhookError> {
        signature::verify(
            signature,
            payload,
            &self.secrets,
            tollgate_core::db::now_unix(),
            self.config.tolerance_secs,
        )
        .map_err(|e| WebhookError::Refused(format!("bad signature: {e}")))?;
        events::handle(&self.database, payload, plans).await
    }
}

/// The workspace's checkouts, newest first.
pub async fn list(database: &Database, workspace_id: &str, limit: u32) -> Result<Vec<CheckoutShown>, PaymentError> {
    Ok(store::list(database, workspace_id, limit)
        .await?
        .iter()
        .map(store::Checkout::shown)
        .collect())
}

/// Why the workspace's top-ups are held (a dispute), if they are.
pub async fn held(database: &Database, workspace_id: &str) -> sqlx::Result<Option<String>> {
    store::held(database, workspace_id).await
}

/// Releases a workspace's top-up hold (an operator's action after a dispute).
pub async fn release_hold(database: &Database, workspace_id: &str) -> sqlx::Result<bool> {
    store::release_hold(database, workspace_id).await
}
