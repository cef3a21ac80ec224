//! The calls the gateway makes to Stripe's API: creating a Checkout Session.
//! Stripe takes form-encoded bodies with bracketed keys
//! (`line_items[0][price_data][currency]=usd`). Every POST carries an
//! `Idempotency-Key`; a call that fails on the network or with a 5xx/429 is
//! retried with the same key, so it can never open two sessions.

use std::time::Duration;

use serde::Deserialize;

const ATTEMPTS: u32 = 3;

#[derive(Clone)]
pub struct StripeApi {
    http: reqwest::Client,
    base: String,
    secret_key: String,
}

/// What a Checkout Session is for.
pub enum SessionKind<'a> {
    /// A one-off payment that credits the wallet.
    Topup,
    /// A monthly subscription to a plan.
    Subscription { plan: &'a str },
}

pub struct NewSession<'a> {
    /// Ours; the Idempotency-Key, and in the metadata so events name it.
    pub checkout_id: &'a str,
    pub workspace_id: &'a str,
    pub kind: SessionKind<'a>,
    pub amount_cents: i64,
    pub currency: &'a str,
    pub product_name: String,
    pub success_url: &'a str,
    pub cancel_url: &'a str,
}

#[derive(Debug, Deserialize)]
pub struct Session {
    pub id: String,
    pub url: Option<String>,
    pub amount_total: Option<i64>,
    pub currency: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("the payment processor refused the request ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("the payment processor could not be reached: {0}")]
    Unreachable(String),
}

impl StripeApi {
    pub fn new(base: &str, secret_key: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            secret_key: secret_key.to_string(),
        })
    }

    pub async fn create_session(&self, new: &NewSession<'_>) -> Result<Session, ApiError> {
        let form = session_form(new);
        let url = format!("{}/v1/checkout/sessions", self.base);
        let mut last = ApiError::Unreachable("no attempt made".into());
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            let sent = self
                .http
                .post(&url)
                .bearer_auth(&self.secret_key)
                .header("Idempotency-Key", new.checkout_id)
                .form(&form)
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(error) => {
                    last = ApiError::Unreachable(error.to_string());
                    continue;
                }
            };
            let status = response.status();
            let body = response
                .bytes()
                .await
                .map_err(|e| ApiError::Unreachable(e.to_string()))?;
            if status.is_success() {
                return serde_json::from_slice(&body).map_err(|e| ApiError::Refused {
                    status: status.as_u16(),
                    message: format!("unreadable Checkout Session: {e}"),
                });
            }
            last = ApiError::Refused {
                status: status.as_u16(),
                message: error_message(&body),
            };
            if !(status.is_server_error() || status.as_u16() == 429) {
                break;
            }
        }
        Err(last)
    }
}

/// Stripe's `{"error": {"message": …}}`, or the body as text.
fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(300).collect())
}

/// The session's form fields, in Stripe's bracket syntax. The workspace and
/// our checkout id travel in `client_reference_id` and `metadata` (and, for a
/// subscription, the subscription's own metadata), so every event about it
/// names them.
fn session_form(new: &NewSession<'_>) -> Vec<(String, String)> {
    let mut form: Vec<(String, String)> = vec![
        ("client_reference_id".into(), new.workspace_id.into()),
        ("success_url".into(), new.success_url.into()),
        ("cancel_url".into(), new.cancel_url.into()),
        ("line_items[0][quantity]".into(), "1".into()),
        ("line_items[0][price_data][currency]".into(), new.currency.into()),
        (
            "line_items[0][price_data][unit_amount]".into(),
            new.amount_cents.to_string(),
        ),
        (
            "line_items[0][price_data][product_data][name]".into(),
            new.product_name.clone(),
        ),
        ("metadata[tollgate_checkout_id]".into(), new.checkout_id.into()),
        ("metadata[workspace_id]".into(), new.workspace_id.into()),
    ];
    match new.kind {
        SessionKind::Topup => {
            form.push(("mode".into(), "payment".into()));
            form.push(("metadata[kind]".into(), "topup".into()));
            form.push((
                "payment_intent_data[metadata][tollgate_checkout_id]".into(),
                new.checkout_id.into(),
            ));
        }
        SessionKind::Subscription { plan } => {
            form.push(("mode".into(), "subscription".into()));
            form.push(("metadata[kind]".into(), "subscription".into()));
            form.push(("metadata[plan]".into(), plan.into()));
            form.push(("line_items[0][price_data][recurring][interval]".into(), "month".into()));
            form.push((
                "subscription_data[metadata][tollgate_checkout_id]".into(),
                new.checkout_id.into(),
            ));
            form.push((
                "subscription_data[metadata][workspace_id]".into(),
                new.workspace_id.into(),
            ));
            form.push(("subscription_data[metadata][plan]".into(), plan.into()));
        }
    }
    form
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_names_our_checkout_on_the_subscription_too() {
        let form = session_form(&NewSession {
            checkout_id: "co_1",
            workspace_id: "ws_1",
            kind: SessionKind::Subscription { plan: "pro" },
            amount_cents: 2900,
            currency: "usd",
            product_name: "Tollgate pro".into(),
            success_url: "https://s",
            cancel_url: "https://c",
        });
        let get = |key: &str| form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        assert_eq!(get("mode"), Some("subscription"));
        assert_eq!(get("line_items[0][price_data][unit_amount]"), Some("2900"));
        assert_eq!(get("line_items[0][price_data][recurring][interval]"), Some("month"));
        assert_eq!(get("subscription_data[metadata][tollgate_checkout_id]"), Some("co_1"));
        assert_eq!(get("client_reference_id"), Some("ws_1"));
    }
}
