//! Plans as data: `[billing.plans.<id>]` in the configuration, on top of the
//! built-in Free, Pro, Team, Business and Enterprise (spec §8, preliminary
//! figures). A configured table replaces the built-in plan of the same id
//! whole, so leaving a key out means its default (for `monthly_requests`,
//! `endpoints` and `seats`: no limit), never the built-in's value.

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tollgate_core::money::Nanos;

/// One `[billing.plans.<id>]` table, as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct PlanConfig {
    /// Model requests per calendar month (UTC); absent: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monthly_requests: Option<u64>,
    /// Hosted actor endpoints (deployments); absent: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<u32>,
    /// Members of the workspace; absent: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seats: Option<u32>,
    /// The gateway fee added to every metered request, exact decimal USD.
    pub request_fee_usd: String,
    /// The plan's price per month, exact decimal USD (shown; nothing charges it yet).
    pub monthly_price_usd: String,
    /// Whether the plan includes spend controls (budgets).
    pub spend_controls: bool,
    /// Whether the plan includes SSO/SAML sign-in.
    pub sso: bool,
}

/// A plan, checked: amounts are exact nano-USD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub id: String,
    pub monthly_requests: Option<u64>,
    pub endpoints: Option<u32>,
    pub seats: Option<u32>,
    pub request_fee: Nanos,
    pub monthly_price: Nanos,
    pub spend_controls: bool,
    pub sso: bool,
}

/// How a plan is shown on the control plane.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct PlanShown {
    pub id: String,
    /// Model requests per calendar month (UTC); null: unlimited.
    pub monthly_requests: Option<u64>,
    /// Hosted actor endpoints; null: unlimited.
    pub endpoints: Option<u32>,
    /// Workspace members; null: unlimited.
    pub seats: Option<u32>,
    /// Gateway fee per metered request, exact USD.
    pub request_fee_usd: String,
    /// Price per month, exact USD.
    pub monthly_price_usd: String,
    pub spend_controls: bool,
    pub sso: bool,
}

impl Plan {
    fn parse(id: &str, config: &PlanConfig) -> anyhow::Result<Plan> {
        let amount = |key: &str, text: &str| -> anyhow::Result<Nanos> {
            let text = if text.trim().is_empty() { "0" } else { text };
            let value = Nanos::from_usd(text).map_err(|e| anyhow::anyhow!("billing.plans.{id}.{key}: {e}"))?;
            anyhow::ensure!(value.0 >= 0, "billing.plans.{id}.{key} must not be negative");
            Ok(value)
        };
        Ok(Plan {
            id: id.to_string(),
            monthly_requests: config.monthly_requests,
            endpoints: config.endpoints,
            seats: config.seats,
            request_fee: amount("request_fee_usd", &config.request_fee_usd)?,
            monthly_price: amount("monthly_price_usd", &config.monthly_price_usd)?,
            spend_controls: config.spend_controls,
            sso: config.sso,
        })
    }

    pub fn shown(&self) -> PlanShown {
        PlanShown {
            id: self.id.clone(),
            monthly_requests: self.monthly_requests,
            endpoints: self.endpoints,
            seats: self.seats,
            request_fee_usd: self.request_fee.usd_string(),
            monthly_price_usd: self.monthly_price.usd_string(),
            spend_controls: self.spend_controls,
            sso: self.sso,
        }
    }
}

/// The built-in plans (spec §8; its figures are preliminary). The spec states
/// no gateway fee amount, and no seat count for Free and Pro nor an endpoint
/// count past Pro: those are unset here (fee 0, no limit) until priced.
pub fn builtin() -> BTreeMap<String, PlanConfig> {
    let plan = |monthly_requests, endpoints, seats, price: &str, spend_controls, sso| PlanConfig {
        monthly_requests,
        endpoints,
        seats,
        request_fee_usd: "0".into(),
        monthly_price_usd: price.into(),
        spend_controls,
        sso,
    };
    BTreeMap::from([
        ("free".into(), plan(Some(1_000), Some(1), None, "0", false, false)),
        ("pro".into(), plan(None, Some(5), None, "29", false, false)),
        ("team".into(), plan(None, None, Some(10), "299", true, false)),
        ("business".into(), plan(None, None, None, "1500", true, false)),
        ("enterprise".into(), plan(None, None, None, "8000", true, true)),
    ])
}

/// Every plan this gateway knows, by id.
#[derive(Clone, Debug)]
pub struct Plans(BTreeMap<String, Arc<Plan>>);

impl Plans {
    /// The built-in plans with `configured` laid over them (a configured id
    /// replaces the built-in one whole).
    pub fn build(configured: &BTreeMap<String, PlanConfig>) -> anyhow::Result<Plans> {
        let mut all = builtin();
        all.extend(configured.iter().map(|(id, plan)| (id.clone(), plan.clone())));
        let mut plans = BTreeMap::new();
        for (id, config) in &all {
            anyhow::ensure!(
                !id.is_empty()
                    && id.len() <= 64
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'),
                "billing.plans.{id}: a plan id is 1 to 64 lowercase letters, digits, '-' and '_'"
            );
            plans.insert(id.clone(), Arc::new(Plan::parse(id, config)?));
        }
        Ok(Plans(plans))
    }

    pub fn get(&self, id: &str) -> Option<&Arc<Plan>> {
        self.0.get(id)
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<Plan>> {
        self.0.values()
    }

    /// The plan ids, for messages.
    pub fn ids(&self) -> String {
        self.0.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_follow_the_spec_and_a_configured_plan_replaces_one_whole() {
        let plans = Plans::build(&BTreeMap::new()).unwrap();
        let free = plans.get("free").unwrap();
        assert_eq!(free.monthly_requests, Some(1_000));
        assert_eq!(free.endpoints, Some(1));
        assert_eq!(plans.get("pro").unwrap().endpoints, Some(5));
        assert_eq!(plans.get("pro").unwrap().monthly_requests, None);
        assert_eq!(plans.get("team").unwrap().seats, Some(10));
        assert_eq!(plans.get("enterprise").unwrap().monthly_price, Nanos(8_000_000_000_000));
        assert!(plans.get("enterprise").unwrap().sso);

        let configured = BTreeMap::from([
            (
                "free".to_string(),
                PlanConfig {
                    monthly_requests: Some(5),
                    request_fee_usd: "0.001".into(),
                    ..PlanConfig::default()
                },
            ),
            ("lab".to_string(), PlanConfig::default()),
        ]);
        let plans = Plans::build(&configured).unwrap();
        let free = plans.get("free").unwrap();
        assert_eq!(free.monthly_requests, Some(5));
        assert_eq!(free.endpoints, None, "replaced whole: no built-in endpoint limit left");
        assert_eq!(free.request_fee, Nanos(1_000_000));
        assert_eq!(plans.get("lab").unwrap().request_fee, Nanos::ZERO);
    }

    #[test]
    fn rejects_bad_amounts_and_ids() {
        let bad_fee = BTreeMap::from([(
            "x".to_string(),
            PlanConfig {
                request_fee_usd: "0.1.2".into(),
                ..PlanConfig::default()
            },
        )]);
        assert!(
            Plans::build(&bad_fee)
                .unwrap_err()
                .to_string()
                .contains("request_fee_usd")
        );
        let negative = BTreeMap::from([(
            "x".to_string(),
            PlanConfig {
                request_fee_usd: "-1".into(),
                ..PlanConfig::default()
            },
        )]);
        assert!(Plans::build(&negative).is_err());
        let bad_id = BTreeMap::from([("Pro Plus".to_string(), PlanConfig::default())]);
        assert!(Plans::build(&bad_id).is_err());
    }
}
