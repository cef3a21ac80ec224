//! The gateway configurations one run measures in turn, each as a fresh
//! gateway in front of the same mock. A configuration is a set of `TOLLGATE_*`
//! settings applied over the environment the bench inherits (so `ab.sh` can
//! still vary anything else).

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Configuration {
    /// As shipped: wallet ledger and metering (to the default file sink) on.
    Default,
    /// `ledger.enabled = false`: no reserve or settle. Metering rides on the
    /// ledger's settlements, so it is off too.
    WalletOff,
    /// `metering.enabled = false`: the wallet stays on, no usage events.
    MeteringOff,
    /// Default plus one no-op guardrail (the built-in prompt-injection check,
    /// gateway-wide, which finds nothing in the bench's prompt and checks
    /// requests only) and the response cache on with nothing kept
    /// (`max_entry_kib = 0`): every request pays one guardrail check and one
    /// exact-cache lookup that misses.
    Guarded,
    /// Default plus the response cache: after the first request every one
    /// is a hit, answered without the mock.
    CacheHit,
}

impl Configuration {
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::WalletOff => "wallet-off",
            Self::MeteringOff => "metering-off",
            Self::Guarded => "guarded",
            Self::CacheHit => "cache-hit",
        }
    }

    /// Environment overrides for the gateway (figment's `__` nesting; see
    /// `host/server/src/config.rs`).
    pub fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::Default => &[],
            Self::WalletOff => &[("TOLLGATE_LEDGER__ENABLED", "false")],
            Self::MeteringOff => &[("TOLLGATE_METERING__ENABLED", "false")],
            Self::Guarded => &[
                (
                    "TOLLGATE_GUARDRAILS__OPERATOR",
                    r#"[{name="noop",package="tollgate/prompt-injection"}]"#,
                ),
                ("TOLLGATE_CACHE__ENABLED", "true"),
                ("TOLLGATE_CACHE__MAX_ENTRY_KIB", "0"),
            ],
            Self::CacheHit => &[("TOLLGATE_CACHE__ENABLED", "true")],
        }
    }

    /// The settings as `KEY=value` lines for the report.
    pub fn settings(self) -> Vec<String> {
        self.env().iter().map(|(k, v)| format!("{k}={v}")).collect()
    }
}
