//! Model groups, as the operator declares them under `[routing.groups]`: a
//! public model id served by several deployments (catalog models of one or
//! more providers), and how requests are balanced between them.
//!
//! A group whose id is itself a catalog model (`openai/gpt-4o`) declares that
//! model's equivalents: a request naming it may be served by any deployment.
//! Deployments are kept by route id and looked up per request, so a provider
//! installed or reloaded later is picked up, and one that disappears is
//! skipped rather than failing the group.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;

/// Most deployments a group may have: every one may be tried on one request.
pub const MAX_DEPLOYMENTS: usize = 16;

/// `[routing]` in `tollgate.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// How long a conversation stays with the deployment that served its last
    /// turn: about as long as providers keep a prompt cache (5 minutes).
    pub affinity_ttl_secs: u64,
    pub groups: BTreeMap<String, GroupConfig>,
    pub probe: ProbeConfig,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            affinity_ttl_secs: 300,
            groups: BTreeMap::new(),
            probe: ProbeConfig::default(),
        }
    }
}

/// `[routing.probe]`: a one-token request to each listed model every
/// `interval_secs`, measured like traffic; off unless both are set.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbeConfig {
    /// 0: off.
    pub interval_secs: u64,
    /// Catalog models or groups (each deployment is probed).
    pub models: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    #[serde(default)]
    pub strategy: Strategy,
    /// Keep a conversation on the deployment that served its previous turn,
    /// where its prompt cache is (docs/routing.md says how a conversation is
    /// recognised).
    #[serde(default = "yes")]
    pub affinity: bool,
    pub deployments: Vec<DeploymentConfig>,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentConfig {
    /// A catalog model id, `provider/model`.
    pub model: String,
    /// Share of traffic under the `weighted` strategy, and the weight of
    /// affinity's rendezvous hash.
    #[serde(default = "one")]
    pub weight: u32,
    /// Requests per minute this deployment may be sent.
    pub rpm: Option<u32>,
    /// Tokens per minute (prompt and answer, as settled) it may use.
    pub tpm: Option<u64>,
}

fn one() -> u32 {
    1
}

/// How a group orders its deployments when the request states no `sort`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// As listed.
    Ordered,
    /// At random in proportion to `weight`.
    #[default]
    Weighted,
    /// Lowest measured time to the answer's head first.
    LeastLatency,
    /// Lowest price first.
    LowestCost,
    /// Power of two choices: of two deployments drawn by weight, the one with
    /// fewer requests in flight.
    #[serde(rename = "p2c")]
    PowerOfTwoChoices,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Ordered => "ordered",
            Strategy::Weighted => "weighted",
            Strategy::LeastLatency => "least-latency",
            Strategy::LowestCost => "lowest-cost",
            Strategy::PowerOfTwoChoices => "p2c",
        }
    }
}

impl RoutingConfig {
    /// Checks every group against the catalog the gateway starts with, so a
    /// typo fails at start and not on a request.
    pub fn validate(&self, catalog: &Catalog) -> anyhow::Result<()> {
        for model in &self.probe.models {
            anyhow::ensure!(
                catalog.resolve(model).is_some() || self.groups.contains_key(model),
                "[routing.probe]: '{model}' is neither a model of the catalog nor a group"
            );
        }
        for (id, group) in &self.groups {
            anyhow::ensure!(!id.is_empty(), "[routing.groups]: a group id is empty");
            anyhow::ensure!(!group.deployments.is_empty(), "routing group '{id}' has no deployments");
            anyhow::ensure!(
                group.deployments.len() <= MAX_DEPLOYMENTS,
                "routing group '{id}' has {} deployments; at most {MAX_DEPLOYMENTS}",
                group.deployments.len()
            );
            for deployment in &group.deployments {
                let model = &deployment.model;
                anyhow::ensure!(
                    deployment.weight > 0,
                    "routing group '{id}': deployment '{model}' has weight 0"
                );
                anyhow::ensure!(
                    catalog.resolve(model).is_some(),
                    "routing group '{id}': deployment '{model}' is not a model of the catalog"
                );
                anyhow::ensure!(
                    model == id || !self.groups.contains_key(model),
                    "routing group '{id}': deployment '{model}' is another group; groups do not nest"
                );
            }
            let mut models: Vec<&str> = group.deployments.iter().map(|d| d.model.as_str()).collect();
            models.sort_unstable();
            if let Some(twice) = models.windows(2).find(|pair| pair[0] == pair[1]) {
                anyhow::bail!("routing group '{id}' lists deployment '{}' twice", twice[0]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> RoutingConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn reads_groups_and_checks_them_against_the_catalog() {
        let catalog = Catalog::build(&BTreeMap::new(), &|_| None).unwrap();
        let good = config(
            r#"
            [groups."gpt-4o"]
            strategy = "p2c"
            deployments = [{ model = "openai/gpt-4o", weight = 3, rpm = 10 }, { model = "openai/gpt-4o-mini" }]
            "#,
        );
        good.validate(&catalog).unwrap();
        let group = &good.groups["gpt-4o"];
        assert_eq!(group.strategy, Strategy::PowerOfTwoChoices);
        assert!(group.affinity);
        assert_eq!(group.deployments[1].weight, 1);
        assert_eq!(good.affinity_ttl_secs, 300);
        for (text, says) in [
            (
                r#"[groups.g]
                deployments = []"#,
                "no deployments",
            ),
            (
                r#"[groups.g]
                deployments = [{ model = "nope/x" }]"#,
                "not a model of the catalog",
            ),
            (
                r#"[groups.g]
                deployments = [{ model = "openai/gpt-4o", weight = 0 }]"#,
                "weight 0",
            ),
            (
                r#"[groups.g]
                deployments = [{ model = "openai/gpt-4o" }, { model = "openai/gpt-4o" }]"#,
                "twice",
            ),
        ] {
            let error = config(text).validate(&catalog).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
        assert!(toml::from_str::<RoutingConfig>("[groups.g]\nstrategy = \"fastest\"\ndeployments = []").is_err());
        let probe = config("[probe]\ninterval_secs = 30\nmodels = [\"nope/x\"]");
        assert!(probe.validate(&catalog).unwrap_err().to_string().contains("nope/x"));
    }
}
