//! `[billing.stripe]` and `[billing.topups]`: where the payment processor is
//! and what a top-up may be.

use serde::{Deserialize, Serialize};

/// `[billing.stripe]`: Stripe Checkout for top-ups and paid plans. Payments
/// are off until `secret_key` is set. Each key can also come from the
/// environment: `TOLLGATE_BILLING__STRIPE__SECRET_KEY`,
/// `TOLLGATE_BILLING__STRIPE__WEBHOOK_SECRET`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StripeConfig {
    /// The API's base URL; tests point it at a local fake.
    pub api_base: String,
    /// The account's secret API key (`sk_…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<String>,
    /// The webhook endpoint's signing secret (`whsec_…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
    /// Secrets still accepted while a rotation is under way: a delivery
    /// signed with any of these or `webhook_secret` is genuine.
    pub previous_webhook_secrets: Vec<String>,
    /// Where the hosted checkout sends the payer afterwards.
    pub success_url: String,
    pub cancel_url: String,
    /// A webhook signature older (or newer) than this many seconds is refused,
    /// so a captured delivery cannot be replayed later.
    pub tolerance_secs: u64,
}

impl Default for StripeConfig {
    fn default() -> Self {
        Self {
            api_base: "https://api.stripe.com".into(),
            secret_key: None,
            webhook_secret: None,
            previous_webhook_secrets: Vec::new(),
            success_url: "http://localhost:8080/console/#/billing?checkout=done".into(),
            cancel_url: "http://localhost:8080/console/#/billing?checkout=cancelled".into(),
            tolerance_secs: 300,
        }
    }
}

/// `[billing.topups]`: bounds on one wallet top-up, exact decimal USD in
/// whole cents.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopupConfig {
    pub min_usd: String,
    pub max_usd: String,
}

impl Default for TopupConfig {
    fn default() -> Self {
        Self {
            min_usd: "5".into(),
            max_usd: "10000".into(),
        }
    }
}
