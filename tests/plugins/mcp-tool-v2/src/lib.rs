//! A test-only tool server on tool WIT 0.2.0, built as 0.2.0 servers out
//! there are: one tool answering an image after a progress report, one
//! prompt and one resource. The conformance fixture moved to 0.3.0, so this
//! one keeps the host's 0.2.0 path under test (`host/components/tests`).
//! Its generated exports are `unsafe`, so this crate cannot forbid unsafe code.

use tollgate_plugin_sdk::tool::{
    CallContext, Content, Prompt, PromptMessages, Resource, ResourceContents, Role, Tool, ToolError, ToolServer,
    progress,
};

pub struct Dot;

/// A 1x1 red PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef,
    0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

impl ToolServer for Dot {
    fn tools() -> Vec<Tool> {
        vec![Tool::new("dot", "Answers a 1x1 PNG after one progress report")]
    }

    fn call(_ctx: CallContext, name: &str, _arguments: &str) -> Result<Vec<Content>, ToolError> {
        match name {
            "dot" => {
                progress::report(1.0, Some(1.0), None);
                Ok(vec![Content::image(PNG.to_vec(), "image/png")])
            }
            other => Err(ToolError::unknown_tool(other)),
        }
    }

    fn prompts() -> Vec<Prompt> {
        vec![Prompt::new("describe", "Asks to describe the dot")]
    }

    fn get_prompt(_ctx: CallContext, name: &str, _arguments: &[(String, String)]) -> Result<PromptMessages, ToolError> {
        match name {
            "describe" => Ok(PromptMessages::new(vec![(
                Role::User,
                Content::text("Describe the dot."),
            )])),
            other => Err(ToolError::new(format!("unknown prompt '{other}'"))),
        }
    }

    fn resources() -> Vec<Resource> {
        vec![Resource::new("dot://png", "png", "The dot", "image/png")]
    }

    fn read_resource(_ctx: CallContext, uri: &str) -> Result<Vec<ResourceContents>, ToolError> {
        match uri {
            "dot://png" => Ok(vec![ResourceContents::blob(uri, "image/png", PNG.to_vec())]),
            other => Err(ToolError::new(format!("unknown resource '{other}'"))),
        }
    }
}

tollgate_plugin_sdk::export_tool_server!(Dot);
