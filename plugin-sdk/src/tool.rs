//! Tool servers (feature `tool`): implement [`ToolServer`], export it with
//! [`export_tool_server!`](crate::export_tool_server).
//!
//! ```ignore
//! use serde::Deserialize;
//! use tollgate_plugin_sdk::tool::{self, CallContext, Content, Tool, ToolError, ToolServer};
//!
//! pub struct Echo;
//!
//! #[derive(Deserialize)]
//! struct Args { text: String }
//!
//! impl ToolServer for Echo {
//!     fn tools() -> Vec<Tool> {
//!         vec![Tool::new("echo", "Answers with its input.")
//!             .input_schema(r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#)
//!             .read_only()]
//!     }
//!
//!     fn call(_ctx: CallContext, name: &str, arguments: &str) -> Result<Vec<Content>, ToolError> {
//!         match name {
//!             "echo" => {
//!                 let args: Args = tool::arguments(arguments)?;
//!                 Ok(vec![Content::Text(args.text)])
//!             }
//!             _ => Err(ToolError::unknown_tool(name)),
//!         }
//!     }
//! }
//!
//! tollgate_plugin_sdk::export_tool_server!(Echo);
//! ```
//!
//! A tool server reaches the network only through [`http`], to origins the
//! operator approved when installing it.
//!
//! With the `tool-v2` feature the component exports
//! `tollgate:tool/tool-server@0.2.0`: [`Content`] also holds images, audio
//! and embedded resources, [`progress::report`] tells the MCP client how far
//! a call has got, and [`ToolServer`] gains prompts, resources and completion
//! (each with a default that offers none; see [`v2`]). With `tool-v3` it
//! exports `tollgate:tool/tool-server@0.3.0`, which adds
//! [`elicitation::elicit`]: a call asks the MCP client's user for input.
//! With `tool-v4` it exports `tollgate:tool/tool-server@0.4.0`, which adds
//! [`models`]: a call asks a model through the gateway's metered pipeline,
//! billed to whoever called the tool (the package must declare the `models`
//! capability; see [`v4`]).

use serde::de::DeserializeOwned;

/// Raw bindings generated from `wit/tool/0.1.0` (and the host interfaces it
/// imports). Tool servers use the re-exports of this module instead.
#[cfg(not(feature = "tool-v2"))]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: ["../wit/host/0.1.0", "../wit/tool/0.1.0"],
        world: "tollgate:tool/tool-server@0.1.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::tool::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

/// Raw bindings generated from `wit/tool/0.2.0` (feature `tool-v2`).
#[cfg(all(feature = "tool-v2", not(feature = "tool-v3")))]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: ["../wit/host/0.1.0", "../wit/tool/0.2.0"],
        world: "tollgate:tool/tool-server@0.2.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::tool::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

/// Raw bindings generated from `wit/tool/0.3.0` (feature `tool-v3`).
#[cfg(all(feature = "tool-v3", not(feature = "tool-v4")))]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: ["../wit/host/0.1.0", "../wit/tool/0.3.0"],
        world: "tollgate:tool/tool-server@0.3.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::tool::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

/// Raw bindings generated from `wit/tool/0.4.0` (feature `tool-v4`).
#[cfg(feature = "tool-v4")]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: ["../wit/host/0.1.0", "../wit/tool/0.4.0"],
        world: "tollgate:tool/tool-server@0.4.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::tool::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

#[cfg(feature = "tool-v2")]
pub mod v2;
#[cfg(feature = "tool-v3")]
pub mod v3;
#[cfg(feature = "tool-v4")]
pub mod v4;

pub use bindings::exports::tollgate::tool::tools::{Annotations, Tool};
#[cfg(not(feature = "tool-v2"))]
pub use bindings::tollgate::host::types::Content;
pub use bindings::tollgate::host::types::{CallContext, ToolError};
#[cfg(feature = "tool-v2")]
pub use v2::{
    Argument, Content, Media, Message, Prompt, PromptMessages, Reference, Resource, ResourceBody, ResourceContents,
    ResourceTemplate, Role, progress,
};
#[cfg(feature = "tool-v3")]
pub use v3::elicitation;
#[cfg(feature = "tool-v4")]
pub use v4::{ModelError, models};

/// The host's per-install settings (`tollgate:host/config`).
pub mod config {
    /// The install's setting `key`, if it has one.
    pub fn get(key: &str) -> Option<String> {
        super::bindings::tollgate::host::config::get(key)
    }
}

/// Log lines into the calling request's trace (`tollgate:host/log`).
pub mod log {
    pub use super::bindings::tollgate::host::log::Level;

    pub fn log(level: Level, message: &str) {
        super::bindings::tollgate::host::log::log(level, message)
    }

    pub fn info(message: &str) {
        log(Level::Info, message)
    }

    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }
}

/// Outbound HTTP through the host (`tollgate:host/http`): approved origins
/// only, no redirects, capped bodies and time.
pub mod http {
    pub use super::bindings::tollgate::host::http::{Error, Request, Response};

    /// Sends `request`; the host enforces the install's origins and caps.
    pub fn send(request: &Request) -> Result<Response, Error> {
        super::bindings::tollgate::host::http::send(request)
    }

    /// A GET of `url` with no body and no credential.
    pub fn get(url: &str) -> Result<Response, Error> {
        send(&Request {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            credential: None,
        })
    }

    impl Error {
        /// The host's reason, as a sentence.
        pub fn message(&self) -> String {
            match self {
                Error::OriginRefused(m) | Error::CredentialRefused(m) | Error::InvalidRequest(m) | Error::Failed(m) => {
                    m.clone()
                }
                Error::TooLarge(cap) => format!("the response is larger than {cap} bytes"),
                Error::Timeout => "the request timed out".into(),
            }
        }
    }
}

/// A tool server: the tools it offers and how to call them.
pub trait ToolServer: 'static {
    /// The tools this server offers (the host asks once per loaded version).
    fn tools() -> Vec<Tool>;

    /// Calls tool `name` with `arguments`, a JSON object. A failure the
    /// caller should read is a [`ToolError`], not a panic: a panic is a crash
    /// that the host reports as the component's fault.
    fn call(ctx: CallContext, name: &str, arguments: &str) -> Result<Vec<Content>, ToolError>;

    /// The prompts this server offers (`tool-v2`; the host asks once per
    /// loaded version). None by default.
    #[cfg(feature = "tool-v2")]
    fn prompts() -> Vec<Prompt> {
        Vec::new()
    }

    /// Prompt `name` filled in with `arguments` (name, value).
    #[cfg(feature = "tool-v2")]
    fn get_prompt(ctx: CallContext, name: &str, arguments: &[(String, String)]) -> Result<PromptMessages, ToolError> {
        let _ = (ctx, arguments);
        Err(ToolError::new(format!("unknown prompt '{name}'")))
    }

    /// The resources this server offers (`tool-v2`). None by default.
    #[cfg(feature = "tool-v2")]
    fn resources() -> Vec<Resource> {
        Vec::new()
    }

    /// The resource templates this server offers (`tool-v2`). None by default.
    #[cfg(feature = "tool-v2")]
    fn resource_templates() -> Vec<ResourceTemplate> {
        Vec::new()
    }

    /// The contents of resource `uri`: a listed one, or one a template matches.
    #[cfg(feature = "tool-v2")]
    fn read_resource(ctx: CallContext, uri: &str) -> Result<Vec<ResourceContents>, ToolError> {
        let _ = ctx;
        Err(ToolError::new(format!("unknown resource '{uri}'")))
    }

    /// Values for `argument` of a prompt or resource template that start like
    /// `value`. No suggestions by default.
    #[cfg(feature = "tool-v2")]
    fn complete(
        ctx: CallContext,
        reference: &Reference,
        argument: &str,
        value: &str,
    ) -> Result<Vec<String>, ToolError> {
        let _ = (ctx, reference, argument, value);
        Ok(Vec::new())
    }
}

/// Parses a tool's `arguments` into `T`, with a message naming what is wrong.
pub fn arguments<T: DeserializeOwned>(arguments: &str) -> Result<T, ToolError> {
    serde_json::from_str(arguments).map_err(|e| ToolError::new(format!("invalid arguments: {e}")))
}

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
        }
    }

    /// The server has no tool `name`.
    pub fn unknown_tool(name: &str) -> Self {
        Self::new(format!("unknown tool '{name}'"))
    }
}

impl Content {
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text(text.into())
    }

    /// A JSON value as content.
    pub fn json(value: &serde_json::Value) -> Self {
        Content::Json(value.to_string())
    }
}

impl Tool {
    /// A tool taking any JSON object, with no annotations; refine it with the
    /// builder methods.
    pub fn new(name: &str, description: &str) -> Self {
        Tool {
            name: name.into(),
            description: description.into(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: None,
            annotations: Annotations {
                read_only: None,
                destructive: None,
                idempotent: None,
                open_world: None,
            },
        }
    }

    /// The JSON Schema of the arguments object.
    pub fn input_schema(mut self, schema: &str) -> Self {
        self.input_schema = schema.into();
        self
    }

    /// The JSON Schema of the JSON content the tool answers with.
    pub fn output_schema(mut self, schema: &str) -> Self {
        self.output_schema = Some(schema.into());
        self
    }

    /// Marks the tool as changing nothing (and so safe to repeat).
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = Some(true);
        self.annotations.destructive = Some(false);
        self.annotations.idempotent = Some(true);
        self
    }

    /// Marks the tool as reaching outside the host (the network).
    pub fn open_world(mut self, open: bool) -> Self {
        self.annotations.open_world = Some(open);
        self
    }
}

/// Adapts a [`ToolServer`] to the generated `Guest` trait. Used by
/// [`export_tool_server!`](crate::export_tool_server); not meant to be named.
#[doc(hidden)]
pub struct ToolServerExport<T: ToolServer>(std::marker::PhantomData<T>);

#[cfg(not(feature = "tool-v2"))]
impl<T: ToolServer> bindings::exports::tollgate::tool::tools::Guest for ToolServerExport<T> {
    fn list_tools() -> Vec<Tool> {
        T::tools()
    }

    fn call_tool(ctx: CallContext, name: String, arguments: String) -> Result<Vec<Content>, ToolError> {
        T::call(ctx, &name, &arguments)
    }
}

/// Export a [`ToolServer`] as this component's `tollgate:tool/tools`
/// interface. Call it exactly once, in the tool server's `cdylib` crate:
/// `tollgate_plugin_sdk::export_tool_server!(MyTools);`.
#[macro_export]
macro_rules! export_tool_server {
    ($server:ty) => {
        const _: () = {
            type __TollgateToolServer = $crate::tool::ToolServerExport<$server>;
            // Only components get the exports: native builds (unit tests) of a
            // cdylib cannot link symbol names like `tollgate:tool/...`.
            #[cfg(target_family = "wasm")]
    $crate::tool::bindings::export!(__TollgateToolServer with_types_in $crate::tool::bindings);
        };
    };
}
