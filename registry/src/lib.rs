//! The Tollgate component registry: what a package is called, what kind it is
//! and how its content is addressed (this file); the manifest (`manifest`) and
//! what it asks for (`capabilities`), the component world check
//! (`component`), content-addressed blob storage (`blobs`), the SQL index
//! (`index`), per-owner upload accounting for quotas (`uploads`), package
//! signatures (`signing`), namespaces' signing keys (`keys`), workspaces'
//! package policies (`policy`), and the [`Registry`] that ties them together
//! with the immutability rules (`registry`) and checks a version before use
//! (`vetting`). The HTTP API lives in the host.
#![forbid(unsafe_code)]

pub mod blobs;
pub mod capabilities;
pub mod component;
pub mod document;
pub mod index;
pub mod keys;
pub mod manifest;
pub mod policy;
mod registry;
pub mod signing;
pub mod uploads;
pub mod vetting;
pub mod visibility;

pub use blobs::{BlobStore, OpenedStore, StorageConfig};
pub use capabilities::Capabilities;
pub use index::{Index, PackageSummary, VersionRecord};
pub use keys::NamespaceKey;
pub use manifest::{Argument, Content, Manifest, ManifestError, Metadata};
pub use policy::PackagePolicy;
pub use registry::{Published, Registry, RegistryError};
pub use signing::PackageSignature;
pub use uploads::QuotaError;
pub use vetting::{Signer, Verified};
pub use visibility::Visibility;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// What a package contains; the kind decides which WIT world a component must
/// implement and how the host runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PackageKind {
    Actor,
    Skill,
    ToolServer,
    PromptTemplate,
    Graph,
    ProviderAdapter,
    /// A pipeline stage that checks (and may redact) requests and answers.
    Guardrail,
}

impl PackageKind {
    /// The WIT world a component of this kind must export, where the kind is a
    /// component at all.
    pub fn wit_world(self) -> Option<&'static str> {
        match self {
            PackageKind::ProviderAdapter => Some("tollgate:provider/provider-adapter@0.1.0"),
            PackageKind::ToolServer => Some("tollgate:tool/tool-server@0.1.0"),
            PackageKind::Skill => Some("tollgate:skill/skill@0.1.0"),
            PackageKind::Guardrail => Some("tollgate:guardrail/guardrail@0.1.0"),
            PackageKind::Actor | PackageKind::PromptTemplate | PackageKind::Graph => None,
        }
    }

    /// Every `(world, export)` a component of this kind may implement, oldest
    /// first. Provider adapters have three: `tollgate:provider@0.1.0`,
    /// `0.2.0`, which adds the native lane, and `0.3.0`, which adds the
    /// operations besides chat; the host loads all three. Tool servers have
    /// four: `tollgate:tool@0.1.0`, `0.2.0`, which adds richer content,
    /// progress, prompts, resources and completion, `0.3.0`, which adds
    /// elicitation (questions to the MCP client's user), and `0.4.0`, which
    /// adds model calls through the gateway's metered pipeline.
    pub fn accepted_worlds(self) -> &'static [(&'static str, &'static str)] {
        match self {
            PackageKind::ProviderAdapter => &[
                (
                    "tollgate:provider/provider-adapter@0.1.0",
                    "tollgate:provider/adapter@0.1.0",
                ),
                (
                    "tollgate:provider/provider-adapter@0.2.0",
                    "tollgate:provider/adapter@0.2.0",
                ),
                (
                    "tollgate:provider/provider-adapter@0.3.0",
                    "tollgate:provider/adapter@0.3.0",
                ),
            ],
            PackageKind::ToolServer => &[
                ("tollgate:tool/tool-server@0.1.0", "tollgate:tool/tools@0.1.0"),
                ("tollgate:tool/tool-server@0.2.0", "tollgate:tool/tools@0.2.0"),
                ("tollgate:tool/tool-server@0.3.0", "tollgate:tool/tools@0.3.0"),
                ("tollgate:tool/tool-server@0.4.0", "tollgate:tool/tools@0.4.0"),
            ],
            PackageKind::Skill => &[("tollgate:skill/skill@0.1.0", "tollgate:skill/runner@0.1.0")],
            PackageKind::Guardrail => &[("tollgate:guardrail/guardrail@0.1.0", "tollgate:guardrail/checks@0.1.0")],
            PackageKind::Actor | PackageKind::PromptTemplate | PackageKind::Graph => &[],
        }
    }

    /// The interface a component of this kind must export: how its world shows
    /// in the component binary.
    pub fn required_export(self) -> Option<&'static str> {
        match self {
            PackageKind::ProviderAdapter => Some("tollgate:provider/adapter@0.1.0"),
            PackageKind::ToolServer => Some("tollgate:tool/tools@0.1.0"),
            PackageKind::Skill => Some("tollgate:skill/runner@0.1.0"),
            PackageKind::Guardrail => Some("tollgate:guardrail/checks@0.1.0"),
            PackageKind::Actor | PackageKind::PromptTemplate | PackageKind::Graph => None,
        }
    }

    pub const ALL: [PackageKind; 7] = [
        PackageKind::ProviderAdapter,
        PackageKind::ToolServer,
        PackageKind::Skill,
        PackageKind::Actor,
        PackageKind::PromptTemplate,
        PackageKind::Graph,
        PackageKind::Guardrail,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PackageKind::Actor => "actor",
            PackageKind::Skill => "skill",
            PackageKind::ToolServer => "tool-server",
            PackageKind::PromptTemplate => "prompt-template",
            PackageKind::Graph => "graph",
            PackageKind::ProviderAdapter => "provider-adapter",
            PackageKind::Guardrail => "guardrail",
        }
    }
}

impl fmt::Display for PackageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PackageKind {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PackageKind::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| {
                let known: Vec<&str> = PackageKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("unknown package kind '{text}' (one of: {})", known.join(", "))
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("package name '{0}' must be 'namespace/name'")]
    MissingNamespace(String),
    #[error("'{0}' must be 1 to 64 characters of lowercase letters, digits and '-', starting with a letter")]
    BadSegment(String),
}

/// `namespace/name`, both lowercase identifiers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PackageName {
    namespace: String,
    name: String,
}

impl PackageName {
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

fn valid_segment(segment: &str) -> bool {
    (1..=64).contains(&segment.len())
        && segment.starts_with(|c: char| c.is_ascii_lowercase())
        && segment
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !segment.ends_with('-')
}

impl FromStr for PackageName {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (namespace, name) = text
            .split_once('/')
            .ok_or_else(|| NameError::MissingNamespace(text.to_string()))?;
        for segment in [namespace, name] {
            if !valid_segment(segment) {
                return Err(NameError::BadSegment(segment.to_string()));
            }
        }
        Ok(Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

impl TryFrom<String> for PackageName {
    type Error = NameError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<PackageName> for String {
    fn from(name: PackageName) -> String {
        name.to_string()
    }
}

impl fmt::Display for PackageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A content address: `sha256:<64 lowercase hex>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a digest of the form sha256:<64 lowercase hex digits>")]
pub struct DigestError(String);

impl Digest {
    pub fn of(bytes: &[u8]) -> Self {
        Digest(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let ok = text.strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if ok {
            Ok(Digest(text.to_string()))
        } else {
            Err(DigestError(text.to_string()))
        }
    }
}

impl TryFrom<String> for Digest {
    type Error = DigestError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<Digest> for String {
    fn from(digest: Digest) -> String {
        digest.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names() {
        let name: PackageName = "acme/weather-tool".parse().unwrap();
        assert_eq!(name.namespace(), "acme");
        assert_eq!(name.to_string(), "acme/weather-tool");
        for bad in [
            "acme", "Acme/x", "acme/", "/x", "acme/x/y", "acme/-x", "acme/x-", "1acme/x",
        ] {
            assert!(bad.parse::<PackageName>().is_err(), "{bad}");
        }
        let json = serde_json::to_string(&name).unwrap();
        assert_eq!(json, "\"acme/weather-tool\"");
        assert!(serde_json::from_str::<PackageName>("\"NOPE\"").is_err());
    }

    #[test]
    fn digests() {
        let digest = Digest::of(b"abc");
        assert_eq!(
            digest.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest.to_string().parse::<Digest>().unwrap(), digest);
        assert!("sha256:ABC".parse::<Digest>().is_err());
        assert!("md5:00".parse::<Digest>().is_err());
    }

    #[test]
    fn kinds_serialize_in_kebab_case() {
        assert_eq!(
            serde_json::to_string(&PackageKind::ProviderAdapter).unwrap(),
            "\"provider-adapter\""
        );
        assert_eq!(PackageKind::Graph.wit_world(), None);
        for kind in PackageKind::ALL {
            assert_eq!(kind.to_string().parse::<PackageKind>().unwrap(), kind);
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{kind}\""));
        }
    }
}
