//! The actor compiler: YAML (docs/actors.md) → the pinned [`crate::Ir`].
//!
//! 1. [`parse`] reads the YAML and checks everything the document alone
//!    decides: its shape, names, step ids, templates and their scopes, and
//!    the types between steps as far as they are known.
//! 2. [`Document::references`] lists what it needs from outside (tool and
//!    skill packages or installs, prompt-template packages, sub-actors); the
//!    caller resolves each into [`Resolutions`] — a gateway against its
//!    registry, or [`compile_file`] for sub-actor files.
//! 3. [`Document::compile`] pins them, checks what needs the sub-actors (their
//!    required inputs and output types), and identifies the IR.
//!
//! Every error names a line and column. The compiler does no I/O except in
//! [`compile_file`], and nothing in the IR depends on how the YAML was
//! written (key order, quoting, flow or block style, comments, anchors).

mod checks;
mod document;
mod error;
mod fields;
mod file;
mod lower;
mod references;
mod schema;
mod steps;
mod template;
mod yaml;

pub use document::{API_VERSION, Document, parse};
pub use error::{CompileError, CompileErrors, Location};
pub use file::{CompiledTree, compile_file};
pub use lower::Compiled;
pub use references::{RefKind, RefSpec, Reference, Resolutions, Resolved};
pub use template::{prompt_template_inputs, validate_prompt_template};
