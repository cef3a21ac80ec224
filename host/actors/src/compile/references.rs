//! What an actor refers to outside itself, and what the caller resolved it
//! to. The compiler never looks anything up: a gateway resolves registry
//! packages, installs and actor ids (asynchronously, against its registry);
//! [`super::compile_file`] resolves `path` sub-actors by compiling them.

use std::collections::BTreeMap;

use super::document::{Document, PromptDef};
use super::error::Location;
use crate::ActorId;
use crate::ir::{ComponentPin, Ir, Prompt};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RefKind {
    Tool,
    Skill,
    Prompt,
    Actor,
}

impl RefKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RefKind::Tool => "tool",
            RefKind::Skill => "skill",
            RefKind::Prompt => "prompt",
            RefKind::Actor => "actor",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefSpec {
    /// A registry package (`namespace/name`) at the newest version in a semver range.
    Package { name: String, range: String },
    /// A component installed in the caller's workspace, by install name.
    Install { name: String },
    /// A sub-actor in a YAML file, relative to the referencing file.
    Path { path: String },
    /// A published actor, by id.
    Id { id: ActorId },
}

impl std::fmt::Display for RefSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefSpec::Package { name, range } => write!(f, "package {name} {range}"),
            RefSpec::Install { name } => write!(f, "install {name}"),
            RefSpec::Path { path } => write!(f, "path {path}"),
            RefSpec::Id { id } => write!(f, "id {id}"),
        }
    }
}

/// One reference of a document: the `alias` it is known by in its section
/// (`tools`, `skills`, `prompts`, `actors`), and where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub kind: RefKind,
    pub alias: String,
    pub spec: RefSpec,
    pub location: Location,
}

impl Reference {
    /// Whether resolving it needs a registry (rather than only local files).
    pub fn is_remote(&self) -> bool {
        !matches!(self.spec, RefSpec::Path { .. })
    }
}

/// What a reference resolved to.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolved {
    /// A tool server or skill, pinned (for [`RefKind::Tool`] and [`RefKind::Skill`]).
    Component(ComponentPin),
    /// A `prompt-template` package's text, pinned (for [`RefKind::Prompt`]).
    Prompt(Prompt),
    /// A sub-actor's id and IR; the IR gives its input and output types.
    Actor { id: ActorId, ir: Box<Ir> },
    /// Why it could not be resolved; reported at the reference.
    Failed(String),
}

/// The caller's answers, by kind and alias.
#[derive(Clone, Debug, Default)]
pub struct Resolutions(BTreeMap<(RefKind, String), Resolved>);

impl Resolutions {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, kind: RefKind, alias: impl Into<String>, resolved: Resolved) {
        self.0.insert((kind, alias.into()), resolved);
    }

    pub fn get(&self, kind: RefKind, alias: &str) -> Option<&Resolved> {
        self.0.get(&(kind, alias.to_string()))
    }

    /// The IR of the sub-actor `alias`, when it resolved.
    pub(crate) fn actor_ir(&self, alias: &str) -> Option<&Ir> {
        match self.get(RefKind::Actor, alias) {
            Some(Resolved::Actor { ir, .. }) => Some(ir),
            _ => None,
        }
    }

    /// The template text of the package prompt `alias`, when it resolved.
    pub(crate) fn prompt_source(&self, alias: &str) -> Option<&str> {
        match self.get(RefKind::Prompt, alias) {
            Some(Resolved::Prompt(prompt)) => Some(&prompt.source),
            _ => None,
        }
    }
}

impl Document {
    /// Everything this actor refers to outside itself, by kind, then alias.
    pub fn references(&self) -> Vec<Reference> {
        let mut references = Vec::new();
        let mut add = |kind, alias: &String, spec: &RefSpec, location| {
            references.push(Reference {
                kind,
                alias: alias.clone(),
                spec: spec.clone(),
                location,
            })
        };
        for (alias, def) in &self.tools {
            add(RefKind::Tool, alias, &def.spec, def.loc);
        }
        for (alias, def) in &self.skills {
            add(RefKind::Skill, alias, &def.spec, def.loc);
        }
        for (alias, prompt) in &self.prompts {
            if let PromptDef::Package(def) = prompt {
                add(RefKind::Prompt, alias, &def.spec, def.loc);
            }
        }
        for (alias, def) in &self.actors {
            add(RefKind::Actor, alias, &def.spec, def.loc);
        }
        references
    }
}
