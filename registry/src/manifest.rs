//! The package manifest: one JSON shape for every kind, with kind-specific
//! metadata. [`Manifest::validate`] is the single place that decides whether a
//! manifest may be published; the index and the HTTP API trust a validated one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Digest, PackageKind, PackageName};

/// The manifest format this registry writes and accepts.
pub const SCHEMA_VERSION: u32 = 1;
/// Media type of WebAssembly components.
pub const WASM_MEDIA_TYPE: &str = "application/wasm";
/// Largest blob the registry accepts (components and documents alike).
pub const MAX_CONTENT_BYTES: u64 = 64 << 20;
/// Document kinds may carry one of these.
const DOCUMENT_MEDIA_TYPES: [&str; 4] = ["application/json", "application/yaml", "text/yaml", "text/plain"];
/// Outbound HTTP to `allowed_hosts` (tool servers and guardrails).
pub const CAPABILITY_HTTP: &str = "http";
/// Model calls through the host, billed to the caller (skills, guardrails,
/// and tool servers on tool WIT 0.4.0, whose world imports them).
pub const CAPABILITY_MODELS: &str = "models";
/// The tool-server world whose components may call models.
pub const TOOL_MODELS_WORLD: &str = "tollgate:tool/tool-server@0.4.0";
/// Capabilities a tool server may declare.
const TOOL_CAPABILITIES: [&str; 2] = [CAPABILITY_HTTP, CAPABILITY_MODELS];
/// Capabilities a skill may declare: calls to models and tools through the host.
const SKILL_CAPABILITIES: [&str; 2] = ["models", "tools"];
const GUARDRAIL_CAPABILITIES: [&str; 2] = ["models", CAPABILITY_HTTP];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema_version: u32,
    pub kind: PackageKind,
    pub name: PackageName,
    pub version: semver::Version,
    #[serde(default)]
    pub description: String,
    pub license: String,
    pub content: Content,
    /// Other packages this one needs, by name, with a semver requirement.
    #[serde(default)]
    pub dependencies: BTreeMap<PackageName, semver::VersionReq>,
    #[serde(default)]
    pub metadata: Metadata,
}

/// What the blob is: its address, size and media type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Content {
    pub digest: Digest,
    pub size: u64,
    pub media_type: String,
}

/// Kind-specific metadata. Components name their WIT world and the
/// capabilities they need; tool servers list the hosts they may call; a
/// prompt template may describe its arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// A prompt template's arguments (the `input.<name>`s it reads), by
    /// name; one not listed is required and undescribed. Left out when
    /// empty, so manifests without it keep their digest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, Argument>,
}

/// What a prompt template says of one argument.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Argument {
    /// Shown to whoever fills it in (an MCP client).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// It may be left out: the template tests for it (`input.x is defined`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// Most arguments a prompt template may describe.
const MAX_ARGUMENTS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid manifest: {0}")]
pub struct ManifestError(pub String);

fn invalid(message: impl Into<String>) -> ManifestError {
    ManifestError(message.into())
}

impl Manifest {
    /// Parses and validates a manifest from JSON.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ManifestError> {
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        manifest.validate()?;
        Ok(manifest)
    }

    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(invalid(format!(
                "schema_version {} is not supported (expected {SCHEMA_VERSION})",
                self.schema_version
            )));
        }
        if self.description.len() > 1024 {
            return Err(invalid("description is longer than 1024 bytes"));
        }
        let license_ok = (1..=128).contains(&self.license.len())
            && self
                .license
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b" .-+()".contains(&b));
        if !license_ok {
            return Err(invalid(
                "license must be an SPDX expression such as 'Apache-2.0' or 'MIT OR Apache-2.0'",
            ));
        }
        if self.content.size == 0 || self.content.size > MAX_CONTENT_BYTES {
            return Err(invalid(format!(
                "content.size must be between 1 and {MAX_CONTENT_BYTES} bytes"
            )));
        }
        if self.dependencies.contains_key(&self.name) {
            return Err(invalid("a package cannot depend on itself"));
        }
        match self.kind.wit_world() {
            Some(world) => self.validate_component(world),
            None => self.validate_document(),
        }
    }

    fn validate_component(&self, world: &str) -> Result<(), ManifestError> {
        if self.content.media_type != WASM_MEDIA_TYPE {
            return Err(invalid(format!(
                "a {} is a WebAssembly component: content.media_type must be '{WASM_MEDIA_TYPE}'",
                self.kind
            )));
        }
        match self.metadata.world.as_deref() {
            Some(declared) if self.kind.accepted_worlds().iter().any(|(w, _)| *w == declared) => {}
            Some(declared) => {
                return Err(invalid(format!(
                    "metadata.world is '{declared}', but a {} implements '{world}'",
                    self.kind
                )));
            }
            None => {
                return Err(invalid(format!(
                    "metadata.world is required: a {} implements '{world}'",
                    self.kind
                )));
            }
        }
        let allowed: &[&str] = match self.kind {
            PackageKind::ToolServer => &TOOL_CAPABILITIES,
            PackageKind::Skill => &SKILL_CAPABILITIES,
            // A guardrail may judge with a model and, where its install
            // approves origins, call a service over HTTP.
            PackageKind::Guardrail => &GUARDRAIL_CAPABILITIES,
            // Provider adapters are pure translators: no capabilities at all.
            _ => &[],
        };
        for capability in &self.metadata.capabilities {
            if !allowed.contains(&capability.as_str()) {
                return Err(invalid(format!(
                    "capability '{capability}' is not available to a {} (allowed: {})",
                    self.kind,
                    if allowed.is_empty() {
                        "none".to_string()
                    } else {
                        allowed.join(", ")
                    }
                )));
            }
        }
        // Only the 0.4.0 tool world imports `models`: declared on an older
        // one, the installer would approve what the component cannot use.
        if self.kind == PackageKind::ToolServer
            && self.metadata.capabilities.iter().any(|c| c == CAPABILITY_MODELS)
            && self.metadata.world.as_deref() != Some(TOOL_MODELS_WORLD)
        {
            return Err(invalid(format!(
                "a tool server declares the 'models' capability only on '{TOOL_MODELS_WORLD}'"
            )));
        }
        if !self.metadata.arguments.is_empty() {
            return Err(invalid(format!(
                "metadata.arguments applies only to prompt templates, not to a {}",
                self.kind
            )));
        }
        if matches!(self.kind, PackageKind::ToolServer | PackageKind::Guardrail) {
            let wants_http = self.metadata.capabilities.iter().any(|c| c == CAPABILITY_HTTP);
            if wants_http && self.metadata.allowed_hosts.is_empty() {
                return Err(invalid(format!(
                    "a {} with the 'http' capability must list allowed_hosts",
                    self.kind
                )));
            }
            if !wants_http && !self.metadata.allowed_hosts.is_empty() {
                return Err(invalid("allowed_hosts needs the 'http' capability"));
            }
            for host in &self.metadata.allowed_hosts {
                if !valid_host(host) {
                    return Err(invalid(format!(
                        "allowed host '{host}' must be '*' or a lowercase host name, optionally '*.'-prefixed and with ':port'"
                    )));
                }
            }
        } else if !self.metadata.allowed_hosts.is_empty() {
            return Err(invalid(format!(
                "allowed_hosts applies only to tool servers, not to a {}",
                self.kind
            )));
        }
        Ok(())
    }

    fn validate_document(&self) -> Result<(), ManifestError> {
        if !DOCUMENT_MEDIA_TYPES.contains(&self.content.media_type.as_str()) {
            return Err(invalid(format!(
                "a {} is a document: content.media_type must be one of {}",
                self.kind,
                DOCUMENT_MEDIA_TYPES.join(", ")
            )));
        }
        let Metadata {
            world,
            capabilities,
            allowed_hosts,
            arguments,
        } = &self.metadata;
        if world.is_some() || !capabilities.is_empty() || !allowed_hosts.is_empty() {
            return Err(invalid(format!(
                "metadata (world, capabilities, allowed_hosts) applies only to components, not to a {}",
                self.kind
            )));
        }
        if !arguments.is_empty() && self.kind != PackageKind::PromptTemplate {
            return Err(invalid(format!(
                "metadata.arguments applies only to prompt templates, not to a {}",
                self.kind
            )));
        }
        self.validate_arguments()
    }

    /// Argument names as a template reads them (`input.<name>`), and short
    /// descriptions: both reach MCP clients.
    fn validate_arguments(&self) -> Result<(), ManifestError> {
        let arguments = &self.metadata.arguments;
        if arguments.len() > MAX_ARGUMENTS {
            return Err(invalid(format!(
                "metadata.arguments may describe at most {MAX_ARGUMENTS} arguments"
            )));
        }
        for (name, argument) in arguments {
            let identifier = (1..=64).contains(&name.len())
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !identifier {
                return Err(invalid(format!(
                    "metadata.arguments: '{name}' must be 1-64 letters, digits and '_', not starting with a digit"
                )));
            }
            if argument.description.len() > 1024 {
                return Err(invalid(format!(
                    "metadata.arguments.{name}.description is longer than 1024 bytes"
                )));
            }
        }
        Ok(())
    }
}

/// `*` (any host the installer approves), or a lowercase host name,
/// optionally `*.`-prefixed and with `:port`.
fn valid_host(host: &str) -> bool {
    if host == "*" {
        return true;
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    if port.is_some_and(|p| p.parse::<u16>().map_or(true, |p| p == 0)) {
        return false;
    }
    let name = name.strip_prefix("*.").unwrap_or(name);
    (1..=253).contains(&name.len())
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter() -> serde_json::Value {
        serde_json::json!({
            "schema_version": 1,
            "kind": "provider-adapter",
            "name": "acme/echo",
            "version": "1.2.3",
            "description": "Echo adapter",
            "license": "Apache-2.0",
            "content": {"digest": Digest::of(b"x").to_string(), "size": 1, "media_type": "application/wasm"},
            "dependencies": {"acme/base": "^1.0"},
            "metadata": {"world": "tollgate:provider/provider-adapter@0.1.0"}
        })
    }

    fn check(value: serde_json::Value) -> Result<Manifest, ManifestError> {
        Manifest::from_json(&serde_json::to_vec(&value).unwrap())
    }

    #[test]
    fn a_valid_adapter_manifest_round_trips() {
        let manifest = check(adapter()).unwrap();
        assert_eq!(manifest.version, semver::Version::new(1, 2, 3));
        let again = check(serde_json::to_value(&manifest).unwrap()).unwrap();
        assert_eq!(again, manifest);
    }

    #[test]
    fn rejects_what_it_should() {
        type Mutation = Box<dyn Fn(&mut serde_json::Value)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("schema_version", Box::new(|m| m["schema_version"] = 2.into())),
            ("semver", Box::new(|m| m["version"] = "1.2".into())),
            ("namespace", Box::new(|m| m["name"] = "echo".into())),
            ("digest", Box::new(|m| m["content"]["digest"] = "sha256:zz".into())),
            ("size", Box::new(|m| m["content"]["size"] = 0.into())),
            (
                "media type",
                Box::new(|m| m["content"]["media_type"] = "text/plain".into()),
            ),
            (
                "world",
                Box::new(|m| m["metadata"]["world"] = "tollgate:tool/tool-server@0.1.0".into()),
            ),
            ("no world", Box::new(|m| m["metadata"] = serde_json::json!({}))),
            (
                "adapter capability",
                Box::new(|m| m["metadata"]["capabilities"] = serde_json::json!(["http"])),
            ),
            (
                "hosts on adapter",
                Box::new(|m| m["metadata"]["allowed_hosts"] = serde_json::json!(["a.com"])),
            ),
            ("license", Box::new(|m| m["license"] = "".into())),
            (
                "self dependency",
                Box::new(|m| m["dependencies"] = serde_json::json!({"acme/echo": "1"})),
            ),
            (
                "bad requirement",
                Box::new(|m| m["dependencies"] = serde_json::json!({"acme/x": "not a req"})),
            ),
            ("unknown field", Box::new(|m| m["extra"] = 1.into())),
        ];
        for (what, mutate) in cases {
            let mut manifest = adapter();
            mutate(&mut manifest);
            assert!(check(manifest).is_err(), "{what} should be rejected");
        }
    }

    #[test]
    fn tool_servers_list_their_hosts() {
        let mut tool = adapter();
        tool["kind"] = "tool-server".into();
        tool["metadata"] = serde_json::json!({
            "world": "tollgate:tool/tool-server@0.1.0",
            "capabilities": ["http"],
            "allowed_hosts": ["api.weather.example", "*.example.org:8443"]
        });
        check(tool.clone()).unwrap();
        tool["metadata"]["allowed_hosts"] = serde_json::json!(["HTTP://bad"]);
        assert!(check(tool.clone()).is_err());
        tool["metadata"]["allowed_hosts"] = serde_json::json!([]);
        assert!(check(tool).is_err(), "http without hosts");
    }

    #[test]
    fn only_a_0_4_0_tool_server_declares_models() {
        let mut tool = adapter();
        tool["kind"] = "tool-server".into();
        tool["metadata"] = serde_json::json!({"world": "tollgate:tool/tool-server@0.4.0", "capabilities": ["models"]});
        check(tool.clone()).unwrap();
        tool["metadata"]["world"] = "tollgate:tool/tool-server@0.3.0".into();
        let refused = check(tool).unwrap_err().to_string();
        assert!(refused.contains("'models' capability only on"), "{refused}");
    }

    #[test]
    fn documents_carry_no_component_metadata() {
        let mut doc = adapter();
        doc["kind"] = "prompt-template".into();
        doc["content"]["media_type"] = "text/plain".into();
        doc["metadata"] = serde_json::json!({});
        check(doc.clone()).unwrap();
        doc["metadata"]["world"] = "x".into();
        assert!(check(doc.clone()).is_err());
        doc["metadata"] =
            serde_json::json!({"arguments": {"tone": {"description": "How it sounds", "optional": true}}});
        let manifest = check(doc.clone()).unwrap();
        assert!(manifest.metadata.arguments["tone"].optional);
        doc["metadata"]["arguments"]["bad name"] = serde_json::json!({});
        assert!(check(doc.clone()).is_err(), "argument names are identifiers");
        doc["metadata"] = serde_json::json!({"arguments": {"tone": {"required": false}}});
        assert!(check(doc.clone()).is_err(), "unknown argument field");
        doc["kind"] = "graph".into();
        doc["metadata"] = serde_json::json!({"arguments": {"tone": {}}});
        assert!(check(doc).is_err(), "arguments on a graph");
        let mut tool = adapter();
        tool["metadata"]["arguments"] = serde_json::json!({"tone": {}});
        assert!(check(tool).is_err(), "arguments on a component");
    }
}
