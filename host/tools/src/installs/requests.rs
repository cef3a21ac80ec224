//! What the `installs.*` operations accept. Kept apart from the install
//! logic because these are the wire shapes: `deny_unknown_fields` makes a
//! misspelt field an error instead of a silent default.

use std::collections::BTreeMap;

/// What `installs.create` asks for.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewInstall {
    pub package: String,
    /// A semver requirement (`1.2.3` means `^1.2.3`); the newest match that is not yanked.
    #[serde(default)]
    pub version: Option<String>,
    /// Defaults to the package's short name.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Origins approved for outbound HTTP; each must be covered by the
    /// package's `allowed_hosts`.
    #[serde(default)]
    pub origins: Vec<String>,
    /// Credentials the host places on the component's requests, by name.
    #[serde(default)]
    pub credentials: BTreeMap<String, NewCredential>,
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
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallChange {
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub config: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub origins: Option<Vec<String>>,
    /// Replaces the credentials when given.
    #[serde(default)]
    pub credentials: Option<BTreeMap<String, NewCredential>>,
}
