//! What a `prompt-template` install holds: the package's minijinja text (no
//! component: nothing is compiled), the arguments it reads and the
//! description an MCP client shows. The text was checked when it was
//! published (`tollgate_registry::document`); it is rendered only through
//! the actors' template engine, never here.

use std::sync::Arc;

use tollgate_registry::VersionRecord;

use super::InstallError;

/// A prompt-template package's text, ready to serve as an MCP prompt.
pub struct PromptTemplate {
    pub source: Arc<str>,
    /// The `input.<name>`s the text reads, sorted by name.
    pub arguments: Vec<Argument>,
    /// The package's description, or one naming the package when it has none
    /// (MCP clients show it to choose a prompt).
    pub description: String,
}

/// One argument: what the package's `metadata.arguments` says of it, if
/// anything. Required unless it says `optional` (a strict template fails on
/// a name it was not given, unless it tests for it).
pub struct Argument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

impl PromptTemplate {
    /// Reads `content`, the verified document of `version`.
    pub(super) fn read(version: &VersionRecord, content: &[u8]) -> Result<Self, InstallError> {
        let label = format!("{}@{}", version.name, version.version);
        let source =
            std::str::from_utf8(content).map_err(|_| InstallError::Load(format!("{label} is not UTF-8 text")))?;
        let described = &version.manifest.metadata.arguments;
        let arguments = tollgate_actors::compile::prompt_template_inputs(source)
            .map_err(|e| InstallError::Load(format!("{label} is not a valid template: {e}")))?
            .into_iter()
            .map(|name| {
                let said = described.get(&name);
                Argument {
                    description: said.map(|a| a.description.clone()).filter(|d| !d.is_empty()),
                    required: !said.is_some_and(|a| a.optional),
                    name,
                }
            })
            .collect();
        let description = match version.manifest.description.trim() {
            "" => format!("Prompt template {label}"),
            given => given.to_string(),
        };
        Ok(Self {
            source: source.into(),
            arguments,
            description,
        })
    }
}
