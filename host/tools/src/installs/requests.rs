//! What an install or an install change asks for. The control plane's
//! `installs.*` params are the wire shapes (with `deny_unknown_fields`, so a
//! misspelt field is an error) and build these; only a credential, which
//! those params carry as it is, is read from the wire here.

use std::collections::BTreeMap;

/// A new install.
#[derive(Clone, Debug, Default)]
pub struct NewInstall {
    pub package: String,
    /// A semver requirement (`1.2.3` means `^1.2.3`); the newest match that is not yanked.
    pub version: Option<String>,
    /// Defaults to the package's short name.
    pub name: Option<String>,
    pub config: BTreeMap<String, String>,
    /// Origins approved for outbound HTTP; each must be covered by the
    /// package's `allowed_hosts`.
    pub origins: Vec<String>,
    /// Credentials the host places on the component's requests, by name.
    pub credentials: BTreeMap<String, NewCredential>,
    /// For a guardrail: where it applies, its order and mode (default: chat,
    /// every key and model, order 0, enforce).
    pub guardrail: Option<crate::guardrails::Placement>,
}

/// A credential as given at install: its value is sealed at once and never
/// shown again.
#[derive(Clone, Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCredential {
    pub value: String,
    /// `bearer` (default), `header:<name>` or `query:<name>`.
    #[serde(default = "bearer")]
    pub placement: String,
    /// The origins it may be sent to; each one of the install's origins.
    /// Default: all of them.
    #[serde(default)]
    pub origins: Option<Vec<String>>,
}

fn bearer() -> String {
    "bearer".into()
}

/// What `installs.update` changes; absent fields stay as they are. The
/// version requirement is resolved again, so an update with none upgrades to
/// the newest match.
#[derive(Clone, Debug, Default)]
pub struct InstallChange {
    pub version: Option<String>,
    pub config: Option<BTreeMap<String, String>>,
    pub origins: Option<Vec<String>>,
    /// Replaces the credentials when given.
    pub credentials: Option<BTreeMap<String, NewCredential>>,
    /// A guardrail's new placement.
    pub guardrail: Option<crate::guardrails::Placement>,
}
