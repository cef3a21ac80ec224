//! Prompt-template installs as MCP prompts. Such a prompt's name is its
//! install's (`<install>__<install>` on `/v1/mcp`, as every prompt there is
//! `<install>__<name>`); its arguments are the `input.<name>`s the text
//! reads, required unless the package's metadata says `optional`.
//! `prompts/get` renders the text with the actors'
//! template engine (`tollgate_actors::runtime::render_document`): the fuel,
//! byte caps and memory-capped render child an actor's templates have, and
//! a tool call's wall time (`components.wall_ms`), so a tenant's template
//! costs the gateway no more than an actor's would.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tollgate_actors::runtime::templates::Problem;

use super::Scope;
use super::catalog::{INTERNAL_ERROR, Outcome, argument_entry, in_scope, named};
use crate::calls::SEPARATOR;
use crate::installs::{Active, Loaded, PromptTemplate};

/// The prompt-template installs in scope whose prompt the caller may use.
fn installed(scope: &Scope) -> Vec<(Arc<Active>, Arc<PromptTemplate>)> {
    in_scope(scope)
        .filter_map(|active| match &active.component {
            Loaded::Prompt(template) if scope.policy().allows(&active.record.name, &active.record.name) => {
                let template = template.clone();
                Some((active, template))
            }
            _ => None,
        })
        .collect()
}

pub(super) fn any(scope: &Scope) -> bool {
    !installed(scope).is_empty()
}

/// Their `prompts/list` entries.
pub(super) fn list(scope: &Scope) -> Vec<Value> {
    installed(scope)
        .into_iter()
        .map(|(active, template)| {
            let install = &active.record.name;
            let arguments: Vec<Value> = (template.arguments.iter())
                .map(|argument| argument_entry(&argument.name, argument.required, argument.description.as_deref()))
                .collect();
            json!({
                "name": named(scope, install, install),
                "description": template.description,
                "arguments": arguments,
            })
        })
        .collect()
}

/// The prompt-template install a (possibly prefixed) prompt name means.
pub(super) fn find(scope: &Scope, name: &str) -> Option<(Arc<Active>, Arc<PromptTemplate>)> {
    let install = match scope.only.as_deref() {
        Some(_) => name,
        None => match name.split_once(SEPARATOR)? {
            (install, local) if install == local => install,
            _ => return None,
        },
    };
    installed(scope)
        .into_iter()
        .find(|(active, _)| active.record.name == install)
}

/// `prompts/get`: the text rendered with `arguments` as its `input`, as
/// one user message. The caller has checked the required arguments.
pub(super) async fn get(
    scope: &Scope,
    name: &str,
    template: &PromptTemplate,
    arguments: Vec<(String, String)>,
) -> Outcome {
    let input: serde_json::Map<String, Value> = arguments
        .into_iter()
        .map(|(key, value)| (key, Value::String(value)))
        .collect();
    let wall = Duration::from_millis(scope.components.installs.host().limits().wall_ms);
    let deadline = tokio::time::Instant::now() + wall;
    let rendered = tollgate_actors::runtime::render_document(
        &scope.components.templates,
        template.source.clone(),
        Value::Object(input),
        deadline,
    )
    .await
    .map_err(|problem| {
        let reason = match problem {
            Problem::Invalid(message) => format!("prompt '{name}' could not be rendered: {message}"),
            Problem::Limit(message) => format!("prompt '{name}' stopped at a template limit: {message}"),
        };
        (INTERNAL_ERROR, reason)
    })?;
    Ok(json!({
        "description": template.description,
        "messages": [{"role": "user", "content": {"type": "text", "text": rendered}}],
    }))
}
