//! Compiling an actor file and the sub-actor files it names by `path`
//! (relative to itself), children first; a cycle among them is an error at
//! the reference that closes it. Every other reference goes to the caller.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::document;
use super::error::{CompileError, CompileErrors};
use super::lower::Compiled;
use super::references::{RefKind, RefSpec, Reference, Resolutions, Resolved};

/// A compiled actor and every sub-actor it reaches through `path`
/// references, in dependency order (each before any actor that uses it),
/// once per id.
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledTree {
    pub root: Compiled,
    pub children: Vec<Compiled>,
}

/// Reads and compiles `path`. `resolve_remote` answers every reference that
/// is not a `path` sub-actor (registry packages, installs, actor ids).
/// Errors name the file they are in.
pub fn compile_file(
    path: &Path,
    resolve_remote: &mut dyn FnMut(&Reference) -> Resolved,
) -> Result<CompiledTree, CompileErrors> {
    let base = normalize(path.parent().unwrap_or(Path::new("")));
    let mut walk = Walk {
        base,
        resolve_remote,
        done: BTreeMap::new(),
        order: Vec::new(),
        stack: Vec::new(),
    };
    let root = walk.file(path)?;
    let mut seen = std::collections::BTreeSet::new();
    let children = walk
        .order
        .into_iter()
        .filter(|compiled| compiled.id != root.id && seen.insert(compiled.id.clone()))
        .collect();
    Ok(CompiledTree { root, children })
}

struct Walk<'a> {
    /// The root file's directory, to name the files of a cycle briefly.
    base: PathBuf,
    resolve_remote: &'a mut dyn FnMut(&Reference) -> Resolved,
    /// Files already compiled (a sub-actor used twice is compiled once).
    done: BTreeMap<PathBuf, Compiled>,
    /// Every compiled file, children before their parents.
    order: Vec<Compiled>,
    /// The files being compiled, outermost first: a file met again here
    /// closes a cycle.
    stack: Vec<PathBuf>,
}

impl Walk<'_> {
    fn file(&mut self, path: &Path) -> Result<Compiled, CompileErrors> {
        let shown = path.display().to_string();
        let source = std::fs::read_to_string(path).map_err(|error| {
            let mut error = CompileError::at(super::Location::new(1, 1), format!("cannot read the file: {error}"));
            error.file = Some(shown.clone());
            CompileErrors::one(error)
        })?;
        let document = document::parse(&source).map_err(|e| e.in_file(&shown))?;
        self.stack.push(path.to_path_buf());
        let mut resolutions = Resolutions::new();
        let mut errors = Vec::new();
        for reference in document.references() {
            let resolved = match &reference.spec {
                RefSpec::Path { path: relative } => {
                    let child = normalize(&path.parent().unwrap_or(Path::new("")).join(relative));
                    match self.child(&child, &reference, &shown) {
                        Ok(compiled) => Resolved::Actor {
                            id: compiled.id,
                            ir: Box::new(compiled.ir),
                        },
                        Err(child_errors) => {
                            errors.extend(child_errors.into_vec());
                            continue;
                        }
                    }
                }
                _ => (self.resolve_remote)(&reference),
            };
            resolutions.insert(reference.kind, reference.alias.clone(), resolved);
        }
        self.stack.pop();
        CompileErrors::check(errors)?;
        let compiled = document.compile(&resolutions).map_err(|e| e.in_file(&shown))?;
        self.done.insert(path.to_path_buf(), compiled.clone());
        self.order.push(compiled.clone());
        Ok(compiled)
    }

    fn child(&mut self, child: &Path, reference: &Reference, shown: &str) -> Result<Compiled, CompileErrors> {
        debug_assert_eq!(reference.kind, RefKind::Actor);
        if let Some(start) = self.stack.iter().position(|open| same_file(open, child)) {
            let chain: Vec<String> = self.stack[start..]
                .iter()
                .chain(std::iter::once(&child.to_path_buf()))
                .map(|p| self.brief(p))
                .collect();
            let mut error = CompileError::at(
                reference.location,
                format!("sub-actor '{}' makes a cycle: {}", reference.alias, chain.join(" → ")),
            );
            error.file = Some(shown.to_string());
            return Err(error.into());
        }
        if let Some(done) = self
            .done
            .iter()
            .find(|(p, _)| same_file(p, child))
            .map(|(_, c)| c.clone())
        {
            return Ok(done);
        }
        self.file(child)
    }

    fn brief(&self, path: &Path) -> String {
        let path = normalize(path);
        let shown = path.strip_prefix(&self.base).unwrap_or(&path);
        shown.display().to_string()
    }
}

/// Two paths name the same file (through links or `..`), when both exist.
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// `dir/./a/../b.yaml` → `dir/b.yaml`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
