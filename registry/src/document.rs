//! Document kinds are checked by the actor compiler when published, so the
//! registry never holds an actor, prompt template or graph that the gateway
//! would refuse to run: an `actor` must be a compiled IR in its RFC 8785
//! canonical form (so its digest and its actor id name the same bytes), a
//! `prompt-template` a valid minijinja template (reading every argument its
//! manifest describes), and a `graph` actor YAML that parses and passes the
//! compiler's local checks.

use crate::PackageKind;

/// Why a document does not fit its kind; the message names the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the content is not a valid {kind}: {message}")]
pub struct DocumentError {
    pub kind: PackageKind,
    pub message: String,
}

pub fn check_document(kind: PackageKind, bytes: &[u8]) -> Result<(), DocumentError> {
    let fail = |message: String| DocumentError { kind, message };
    let text = || std::str::from_utf8(bytes).map_err(|_| fail("it is not UTF-8 text".into()));
    match kind {
        PackageKind::Actor => {
            let ir: tollgate_actors::Ir = serde_json::from_slice(bytes).map_err(|e| {
                fail(format!(
                    "it is not a compiled actor IR ({e}); publish actors with `tollgate actors publish`"
                ))
            })?;
            let canonical = tollgate_actors::canonical_bytes(&ir).map_err(|e| fail(e.to_string()))?;
            if canonical != bytes {
                return Err(fail("it is not in RFC 8785 canonical form".into()));
            }
            Ok(())
        }
        PackageKind::PromptTemplate => {
            tollgate_actors::compile::validate_prompt_template(text()?).map_err(|errors| fail(errors.to_string()))
        }
        PackageKind::Graph => tollgate_actors::compile::parse(text()?)
            .map(|_| ())
            .map_err(|errors| fail(errors.to_string())),
        PackageKind::ProviderAdapter | PackageKind::ToolServer | PackageKind::Skill | PackageKind::Guardrail => Ok(()),
    }
}

/// Checks that every argument a prompt template's manifest describes
/// (`metadata.arguments`) is one its text reads (`input.<name>`): a
/// description of an argument nobody fills in would only mislead.
pub fn check_prompt_arguments(manifest: &crate::Manifest, bytes: &[u8]) -> Result<(), DocumentError> {
    let kind = manifest.kind;
    let fail = |message: String| DocumentError { kind, message };
    if kind != PackageKind::PromptTemplate || manifest.metadata.arguments.is_empty() {
        return Ok(());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| fail("it is not UTF-8 text".into()))?;
    let read = tollgate_actors::compile::prompt_template_inputs(text).map_err(fail)?;
    match manifest.metadata.arguments.keys().find(|name| !read.contains(name)) {
        Some(name) => Err(fail(format!(
            "metadata.arguments describes '{name}', but the template never reads input.{name}"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_checked_by_the_compiler() {
        check_document(PackageKind::PromptTemplate, b"Hello {{ input.name }}").unwrap();
        let error = check_document(PackageKind::PromptTemplate, b"Hello {{ input.name ").unwrap_err();
        assert_eq!(error.kind, PackageKind::PromptTemplate);
        assert!(check_document(PackageKind::Graph, b"kind: [").is_err());
        assert!(check_document(PackageKind::Actor, br#"{"a": 1}"#).is_err());
    }
}
