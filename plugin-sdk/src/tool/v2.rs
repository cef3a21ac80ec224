//! What tool WIT 0.2.0 adds (feature `tool-v2`): richer [`Content`],
//! [`progress`] reports, and the prompts, resources and completion a
//! [`ToolServer`](super::ToolServer) may offer besides tools.
//!
//! ```ignore
//! use tollgate_plugin_sdk::tool::{CallContext, Content, Prompt, PromptMessages, Role, Tool, ToolError, ToolServer, progress};
//!
//! pub struct Pictures;
//!
//! impl ToolServer for Pictures {
//!     fn tools() -> Vec<Tool> {
//!         vec![Tool::new("dot", "A 1x1 PNG.")]
//!     }
//!
//!     fn call(_ctx: CallContext, name: &str, _arguments: &str) -> Result<Vec<Content>, ToolError> {
//!         match name {
//!             "dot" => {
//!                 progress::report(1.0, Some(1.0), None);
//!                 Ok(vec![Content::image(PNG.to_vec(), "image/png")])
//!             }
//!             _ => Err(ToolError::unknown_tool(name)),
//!         }
//!     }
//!
//!     fn prompts() -> Vec<Prompt> {
//!         vec![Prompt::new("describe", "Asks a model to describe a picture.").argument("style", "How to describe it", false)]
//!     }
//!
//!     fn get_prompt(_ctx: CallContext, name: &str, arguments: &[(String, String)]) -> Result<PromptMessages, ToolError> {
//!         let style = arguments.iter().find(|(k, _)| k == "style").map_or("plainly", |(_, v)| v.as_str());
//!         match name {
//!             "describe" => Ok(PromptMessages::new(vec![(Role::User, Content::text(format!("Describe the picture {style}.")))])),
//!             _ => Err(ToolError::new(format!("unknown prompt '{name}'"))),
//!         }
//!     }
//! }
//! ```

use super::bindings::exports::tollgate::tool::{completion, prompts, resources, tools};
use super::{CallContext, ToolError, ToolServer, ToolServerExport};

pub use super::bindings::exports::tollgate::tool::completion::Reference;
pub use super::bindings::exports::tollgate::tool::prompts::{Argument, Message, Prompt, PromptMessages, Role};
pub use super::bindings::exports::tollgate::tool::resources::{Resource, ResourceTemplate};
pub use super::bindings::tollgate::tool::types::{Content, Media, ResourceBody, ResourceContents};

/// How far the current call has got (`tollgate:tool/progress`). The host
/// passes a report to the MCP client when it asked for progress, and only
/// when `progress` is greater than the last report's.
pub mod progress {
    pub fn report(progress: f64, total: Option<f64>, message: Option<&str>) {
        super::super::bindings::tollgate::tool::progress::report(progress, total, message)
    }
}

impl Content {
    pub fn image(data: Vec<u8>, mime_type: &str) -> Self {
        Content::Image(Media {
            data,
            mime_type: mime_type.into(),
        })
    }

    pub fn audio(data: Vec<u8>, mime_type: &str) -> Self {
        Content::Audio(Media {
            data,
            mime_type: mime_type.into(),
        })
    }

    /// A resource's text, embedded.
    pub fn resource_text(uri: &str, mime_type: &str, text: impl Into<String>) -> Self {
        Content::Resource(ResourceContents::text(uri, mime_type, text))
    }
}

impl ResourceContents {
    pub fn text(uri: &str, mime_type: &str, text: impl Into<String>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Text(text.into()),
        }
    }

    pub fn blob(uri: &str, mime_type: &str, bytes: Vec<u8>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Blob(bytes),
        }
    }
}

impl Prompt {
    /// A prompt without arguments; add them with [`argument`](Self::argument).
    pub fn new(name: &str, description: &str) -> Self {
        Prompt {
            name: name.into(),
            description: description.into(),
            arguments: Vec::new(),
        }
    }

    pub fn argument(mut self, name: &str, description: &str, required: bool) -> Self {
        self.arguments.push(Argument {
            name: name.into(),
            description: Some(description.into()).filter(|d: &String| !d.is_empty()),
            required,
        });
        self
    }
}

impl PromptMessages {
    /// Messages without a description.
    pub fn new(messages: Vec<(Role, Content)>) -> Self {
        PromptMessages {
            description: None,
            messages: messages
                .into_iter()
                .map(|(role, content)| Message { role, content })
                .collect(),
        }
    }
}

impl Resource {
    pub fn new(uri: &str, name: &str, description: &str, mime_type: &str) -> Self {
        Resource {
            uri: uri.into(),
            name: name.into(),
            description: Some(description.into()),
            mime_type: Some(mime_type.into()),
        }
    }
}

impl ResourceTemplate {
    pub fn new(uri_template: &str, name: &str, description: &str, mime_type: &str) -> Self {
        ResourceTemplate {
            uri_template: uri_template.into(),
            name: name.into(),
            description: Some(description.into()),
            mime_type: Some(mime_type.into()),
        }
    }
}

impl<T: ToolServer> tools::Guest for ToolServerExport<T> {
    fn list_tools() -> Vec<tools::Tool> {
        T::tools()
    }

    fn call_tool(ctx: CallContext, name: String, arguments: String) -> Result<Vec<Content>, ToolError> {
        T::call(ctx, &name, &arguments)
    }
}

impl<T: ToolServer> prompts::Guest for ToolServerExport<T> {
    fn list_prompts() -> Vec<Prompt> {
        T::prompts()
    }

    fn get_prompt(
        ctx: CallContext,
        name: String,
        arguments: Vec<(String, String)>,
    ) -> Result<PromptMessages, ToolError> {
        T::get_prompt(ctx, &name, &arguments)
    }
}

impl<T: ToolServer> resources::Guest for ToolServerExport<T> {
    fn list_resources() -> Vec<Resource> {
        T::resources()
    }

    fn list_resource_templates() -> Vec<ResourceTemplate> {
        T::resource_templates()
    }

    fn read_resource(ctx: CallContext, uri: String) -> Result<Vec<ResourceContents>, ToolError> {
        T::read_resource(ctx, &uri)
    }
}

impl<T: ToolServer> completion::Guest for ToolServerExport<T> {
    fn complete(
        ctx: CallContext,
        reference: Reference,
        argument: String,
        value: String,
    ) -> Result<Vec<String>, ToolError> {
        T::complete(ctx, &reference, &argument, &value)
    }
}
