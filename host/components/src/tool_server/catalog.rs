//! What a 0.2.0 tool server offers besides tools: prompts, resources and
//! resource templates, listed once at load and checked (counts, names,
//! URIs), and the calls that read them (`get-prompt`, `read-resource`,
//! `complete`), each in a fresh store under the same time, memory and output
//! caps as a tool call. A 0.1.0 server offers none.

use std::sync::Arc;

use wasmtime::Store;

use super::{Bindings, ToolServer, V2World, v3, v4, valid_tool_name};
use crate::bindings::{
    Content, Prompt, PromptMessages, Reference, Resource, ResourceContents, ResourceTemplate, ToolError,
};
use crate::grants::Grants;
use crate::state::{CallState, Invocation};
use crate::{CallError, content};

/// Most prompts, resources or templates one server may list (each).
const MAX_ENTRIES: usize = 128;
/// Most completion values one answer may hold (MCP's own cap).
pub const MAX_COMPLETIONS: usize = 100;

/// A 0.2.0 server's prompts, resources and resource templates, as listed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
}

/// Asks a 0.2.0 instance for its prompts, resources and templates.
pub(super) fn listed(store: &mut Store<CallState>, bindings: &V2World) -> wasmtime::Result<Catalog> {
    Ok(Catalog {
        prompts: bindings.tollgate_tool_prompts().call_list_prompts(&mut *store)?,
        resources: bindings.tollgate_tool_resources().call_list_resources(&mut *store)?,
        templates: bindings
            .tollgate_tool_resources()
            .call_list_resource_templates(&mut *store)?,
    })
}

impl Catalog {
    /// Counts capped, prompt names well formed and unique, resource URIs
    /// present and unique, names present.
    pub(super) fn checked(self) -> anyhow::Result<Self> {
        for (what, count) in [
            ("prompts", self.prompts.len()),
            ("resources", self.resources.len()),
            ("resource templates", self.templates.len()),
        ] {
            anyhow::ensure!(
                count <= MAX_ENTRIES,
                "it lists {count} {what}; at most {MAX_ENTRIES} are allowed"
            );
        }
        for (i, prompt) in self.prompts.iter().enumerate() {
            anyhow::ensure!(
                valid_tool_name(&prompt.name),
                "prompt name '{}' must be 1-64 letters, digits, '_' or '-'",
                prompt.name
            );
            anyhow::ensure!(
                self.prompts[..i].iter().all(|p| p.name != prompt.name),
                "prompt '{}' is listed twice",
                prompt.name
            );
        }
        for (i, resource) in self.resources.iter().enumerate() {
            anyhow::ensure!(
                !resource.uri.is_empty() && !resource.name.is_empty(),
                "every resource needs a URI and a name"
            );
            anyhow::ensure!(
                self.resources[..i].iter().all(|r| r.uri != resource.uri),
                "resource '{}' is listed twice",
                resource.uri
            );
        }
        for template in &self.templates {
            anyhow::ensure!(
                !template.uri_template.is_empty() && !template.name.is_empty(),
                "every resource template needs a URI template and a name"
            );
        }
        Ok(self)
    }

    pub fn prompt(&self, name: &str) -> Option<&Prompt> {
        self.prompts.iter().find(|prompt| prompt.name == name)
    }

    pub fn template(&self, uri_template: &str) -> Option<&ResourceTemplate> {
        self.templates
            .iter()
            .find(|template| template.uri_template == uri_template)
    }

    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty() && self.resources.is_empty() && self.templates.is_empty()
    }
}

/// The failure a 0.1.0 server answers for what only 0.2.0 has.
fn not_offered(what: &str) -> ToolError {
    ToolError {
        message: format!("this tool server (tool WIT 0.1.0) offers no {what}"),
    }
}

impl ToolServer {
    /// The prompts, resources and templates it listed when loaded.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Prompt `name` filled in with `arguments`, in a fresh store.
    pub async fn get_prompt(
        self: &Arc<Self>,
        invocation: Invocation,
        grants: Arc<Grants>,
        name: &str,
        arguments: Vec<(String, String)>,
    ) -> Result<PromptMessages, CallError> {
        let name = name.to_string();
        self.off_thread(invocation.depth, move |this, runtime| {
            let answer = this.run(runtime, invocation, grants, |store, bindings, context| match bindings {
                Bindings::V1(_) => Ok(Err(not_offered("prompts"))),
                Bindings::V2(b) => b
                    .tollgate_tool_prompts()
                    .call_get_prompt(store, context, &name, &arguments),
                Bindings::V3(b) => b
                    .tollgate_tool_prompts()
                    .call_get_prompt(store, context, &name, &arguments)
                    .map(|answer| answer.map(v3::prompt_messages)),
                Bindings::V4(b) => b
                    .tollgate_tool_prompts()
                    .call_get_prompt(store, context, &name, &arguments)
                    .map(|answer| answer.map(v4::prompt_messages)),
            })?;
            let parts: Vec<Content> = answer.messages.iter().map(|message| message.content.clone()).collect();
            let description = answer.description.as_ref().map_or(0, String::len);
            this.check_output(&parts, description)?;
            Ok(answer)
        })
        .await
    }

    /// The contents of resource `uri`, in a fresh store.
    pub async fn read_resource(
        self: &Arc<Self>,
        invocation: Invocation,
        grants: Arc<Grants>,
        uri: &str,
    ) -> Result<Vec<ResourceContents>, CallError> {
        let uri = uri.to_string();
        self.off_thread(invocation.depth, move |this, runtime| {
            let contents = this.run(runtime, invocation, grants, |store, bindings, context| match bindings {
                Bindings::V1(_) => Ok(Err(not_offered("resources"))),
                Bindings::V2(b) => b.tollgate_tool_resources().call_read_resource(store, context, &uri),
                Bindings::V3(b) => b.tollgate_tool_resources().call_read_resource(store, context, &uri),
                Bindings::V4(b) => b.tollgate_tool_resources().call_read_resource(store, context, &uri),
            })?;
            let mut size = 0;
            for part in &contents {
                content::check_resource(part).map_err(|reason| this.fault(reason))?;
                size += content::resource_weight(part);
            }
            this.check_size(size)?;
            Ok(contents)
        })
        .await
    }

    /// Completion values for `argument` of `reference`, starting like
    /// `value`, in a fresh store; at most [`MAX_COMPLETIONS`].
    pub async fn complete(
        self: &Arc<Self>,
        invocation: Invocation,
        grants: Arc<Grants>,
        reference: Reference,
        argument: &str,
        value: &str,
    ) -> Result<Vec<String>, CallError> {
        let (argument, value) = (argument.to_string(), value.to_string());
        self.off_thread(invocation.depth, move |this, runtime| {
            let values = this.run(runtime, invocation, grants, |store, bindings, context| match bindings {
                Bindings::V1(_) => Ok(Err(not_offered("completion"))),
                Bindings::V2(b) => b
                    .tollgate_tool_completion()
                    .call_complete(store, context, &reference, &argument, &value),
                Bindings::V3(b) => b.tollgate_tool_completion().call_complete(
                    store,
                    context,
                    &v3::reference(&reference),
                    &argument,
                    &value,
                ),
                Bindings::V4(b) => b.tollgate_tool_completion().call_complete(
                    store,
                    context,
                    &v4::reference(&reference),
                    &argument,
                    &value,
                ),
            })?;
            if values.len() > MAX_COMPLETIONS {
                return Err(this.fault(format!(
                    "answered {} completion values; at most {MAX_COMPLETIONS} are allowed",
                    values.len()
                )));
            }
            this.check_size(values.iter().map(String::len).sum())?;
            Ok(values)
        })
        .await
    }
}
