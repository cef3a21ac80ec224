//! The operator's price per tool call (`[tool_prices]`): a fixed, exact
//! amount charged to the caller's wallet for each call of a component's
//! tool, on top of whatever the call's model calls cost. It is held before
//! the component runs (a wallet that cannot pay is refused then, and the
//! tool never runs) and posted with the call's request-log row as that
//! row's fee, so it shows as a fee line of its own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tollgate_core::money::Nanos;

/// `[tool_prices]` as configured.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPricesConfig {
    /// USD per call of any component tool whose package has no price of
    /// its own; "0" (the default) is free.
    pub default_usd: String,
    /// USD per call, by package name (`namespace/name`), over the default.
    pub packages: BTreeMap<String, String>,
}

impl Default for ToolPricesConfig {
    fn default() -> Self {
        Self {
            default_usd: "0".into(),
            packages: BTreeMap::new(),
        }
    }
}

/// The checked prices, in nano-USD.
#[derive(Clone, Debug, Default)]
pub struct ToolPrices {
    default: Nanos,
    packages: BTreeMap<String, Nanos>,
}

impl ToolPrices {
    pub fn from_config(config: &ToolPricesConfig) -> anyhow::Result<Self> {
        let amount = |key: &str, text: &str| -> anyhow::Result<Nanos> {
            let amount = Nanos::from_usd(text).map_err(|e| anyhow::anyhow!("tool_prices.{key}: {e}"))?;
            anyhow::ensure!(amount.0 >= 0, "tool_prices.{key} must not be negative");
            Ok(amount)
        };
        let mut packages = BTreeMap::new();
        for (package, text) in &config.packages {
            package
                .parse::<tollgate_registry::PackageName>()
                .map_err(|e| anyhow::anyhow!("tool_prices.packages: {e}"))?;
            packages.insert(package.clone(), amount(&format!("packages.\"{package}\""), text)?);
        }
        Ok(Self {
            default: amount("default_usd", &config.default_usd)?,
            packages,
        })
    }

    /// The price of one call of a tool of `package`.
    pub fn of(&self, package: &str) -> Nanos {
        self.packages.get(package).copied().unwrap_or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_price_overrides_the_default_and_bad_amounts_are_refused() {
        let mut config = ToolPricesConfig {
            default_usd: "0.000001".into(),
            packages: BTreeMap::from([("acme/search".to_string(), "0.0025".to_string())]),
        };
        let prices = ToolPrices::from_config(&config).unwrap();
        assert_eq!(prices.of("acme/search"), Nanos(2_500_000));
        assert_eq!(prices.of("acme/other"), Nanos(1_000));
        config.default_usd = "-1".into();
        assert!(ToolPrices::from_config(&config).is_err());
        config.default_usd = "0".into();
        config.packages.insert("not a name".into(), "1".into());
        assert!(ToolPrices::from_config(&config).is_err());
    }
}
