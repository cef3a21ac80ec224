//! Tool WIT 0.3.0's exports, as the host's one shape. 0.3.0 is 0.2.0 plus
//! the `elicitation` import: its `types` (content, resource contents) are
//! 0.2.0's Rust types already, and the records of its `prompts`,
//! `resources` and `completion` have 0.2.0's fields, so each converts field
//! for field. 0.4.0's exports have the same shapes again: [`same_shapes`]
//! writes the conversions for either version's bindings.

/// The conversions of one tool WIT version (0.3.0 and later) whose exports
/// have 0.2.0's shapes: `$world` is the generated world, `$bindings` its
/// module under `crate::bindings`.
macro_rules! same_shapes {
    ($world:ident, $bindings:ident) => {
        use wasmtime::Store;

        use super::catalog::Catalog;
        use super::$world;
        use crate::bindings::$bindings::exports::tollgate::tool::{completion, prompts, resources};
        use crate::bindings::{
            Prompt, PromptArgument, PromptMessage, PromptMessages, Reference, Resource, ResourceTemplate, Role,
        };
        use crate::state::CallState;

        /// Asks an instance for its prompts, resources and templates.
        pub(super) fn listed(store: &mut Store<CallState>, bindings: &$world) -> wasmtime::Result<Catalog> {
            let prompts = bindings.tollgate_tool_prompts().call_list_prompts(&mut *store)?;
            let resources = bindings
                .tollgate_tool_resources()
                .call_list_resources(&mut *store)?;
            let templates = bindings
                .tollgate_tool_resources()
                .call_list_resource_templates(&mut *store)?;
            Ok(Catalog {
                prompts: prompts.into_iter().map(prompt).collect(),
                resources: resources.into_iter().map(resource).collect(),
                templates: templates.into_iter().map(template).collect(),
            })
        }

        fn prompt(p: prompts::Prompt) -> Prompt {
            Prompt {
                name: p.name,
                description: p.description,
                arguments: p
                    .arguments
                    .into_iter()
                    .map(|a| PromptArgument {
                        name: a.name,
                        description: a.description,
                        required: a.required,
                    })
                    .collect(),
            }
        }

        fn resource(r: resources::Resource) -> Resource {
            Resource {
                uri: r.uri,
                name: r.name,
                description: r.description,
                mime_type: r.mime_type,
            }
        }

        fn template(t: resources::ResourceTemplate) -> ResourceTemplate {
            ResourceTemplate {
                uri_template: t.uri_template,
                name: t.name,
                description: t.description,
                mime_type: t.mime_type,
            }
        }

        pub(super) fn prompt_messages(m: prompts::PromptMessages) -> PromptMessages {
            PromptMessages {
                description: m.description,
                messages: m
                    .messages
                    .into_iter()
                    .map(|message| PromptMessage {
                        role: match message.role {
                            prompts::Role::User => Role::User,
                            prompts::Role::Assistant => Role::Assistant,
                        },
                        content: message.content,
                    })
                    .collect(),
            }
        }

        pub(super) fn reference(r: &Reference) -> completion::Reference {
            match r {
                Reference::Prompt(name) => completion::Reference::Prompt(name.clone()),
                Reference::ResourceTemplate(template) => completion::Reference::ResourceTemplate(template.clone()),
            }
        }
    };
}

pub(super) use same_shapes;

same_shapes!(V3World, tool_server_v3);
