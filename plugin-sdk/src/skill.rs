//! Skills (feature `skill`): implement [`Skill`], export it with
//! [`export_skill!`](crate::export_skill).
//!
//! ```ignore
//! use serde::Deserialize;
//! use tollgate_plugin_sdk::serde_json::json;
//! use tollgate_plugin_sdk::skill::{self, CallContext, Description, Skill, SkillError};
//!
//! pub struct Shout;
//!
//! #[derive(Deserialize)]
//! struct Input { text: String, model: String }
//!
//! impl Skill for Shout {
//!     fn describe() -> Description {
//!         Description::new("shout", "Rewrites a text in capitals, via a model.")
//!     }
//!
//!     fn run(_ctx: CallContext, input: &str) -> Result<String, SkillError> {
//!         let input: Input = skill::input(input)?;
//!         let answer = skill::models::complete(&input.model, &format!("Shout this: {}", input.text))?;
//!         Ok(json!({ "text": answer }).to_string())
//!     }
//! }
//!
//! tollgate_plugin_sdk::export_skill!(Shout);
//! ```
//!
//! A skill has no network: it reaches models through [`models`] (metered,
//! billed to the caller) and tools through [`tools`] (the caller's workspace).

use serde::de::DeserializeOwned;

/// Raw bindings generated from `wit/skill/0.1.0` (and the host interfaces it
/// imports). Skills use the re-exports of this module instead.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: ["../wit/host/0.1.0", "../wit/skill/0.1.0"],
        world: "tollgate:skill/skill@0.1.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::skill::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::exports::tollgate::skill::runner::{Description, SkillError};
pub use bindings::tollgate::host::models::ModelError;
pub use bindings::tollgate::host::types::{CallContext, Content, ToolError};

/// The host's per-install settings (`tollgate:host/config`).
pub mod config {
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
}

/// Model calls through the gateway's metered pipeline (`tollgate:host/models`).
pub mod models {
    use serde_json::{Value, json};

    use super::ModelError;

    /// A chat completion: `request` is an OpenAI chat-completions body; the
    /// answer is the `chat.completion` object, with `usage.cost`.
    pub fn chat(request: &Value) -> Result<Value, ModelError> {
        let answer = super::bindings::tollgate::host::models::chat(&request.to_string())?;
        serde_json::from_str(&answer).map_err(|e| ModelError {
            status: 502,
            code: "invalid_answer".into(),
            message: format!("the gateway's answer is not JSON: {e}"),
        })
    }

    /// One user message to `model`; the answer's text.
    pub fn complete(model: &str, prompt: &str) -> Result<String, ModelError> {
        let answer = chat(&json!({
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
        }))?;
        Ok(answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }
}

/// Calls to tools installed in the caller's workspace (`tollgate:host/tools`).
pub mod tools {
    use super::{Content, ToolError};

    /// Calls `tool` (`<install>__<tool>`) with `arguments`, a JSON object.
    pub fn call(tool: &str, arguments: &serde_json::Value) -> Result<Vec<Content>, ToolError> {
        super::bindings::tollgate::host::tools::call(tool, &arguments.to_string())
    }
}

/// A skill: what it does, and running it.
pub trait Skill: 'static {
    fn describe() -> Description;

    /// Runs the skill on `input`, a JSON object; answers a serialized JSON value.
    fn run(ctx: CallContext, input: &str) -> Result<String, SkillError>;
}

/// Parses a skill's `input` into `T`, with a message naming what is wrong.
pub fn input<T: DeserializeOwned>(input: &str) -> Result<T, SkillError> {
    serde_json::from_str(input).map_err(|e| SkillError::InvalidInput(format!("invalid input: {e}")))
}

impl From<ModelError> for SkillError {
    fn from(error: ModelError) -> Self {
        SkillError::Model(error)
    }
}

impl Description {
    /// A description with an empty-object input schema and any output; refine
    /// it with the builder methods.
    pub fn new(name: &str, description: &str) -> Self {
        Description {
            name: name.into(),
            description: description.into(),
            instructions: String::new(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: "{}".into(),
        }
    }

    pub fn instructions(mut self, text: &str) -> Self {
        self.instructions = text.into();
        self
    }

    pub fn input_schema(mut self, schema: &str) -> Self {
        self.input_schema = schema.into();
        self
    }

    pub fn output_schema(mut self, schema: &str) -> Self {
        self.output_schema = schema.into();
        self
    }
}

/// Adapts a [`Skill`] to the generated `Guest` trait. Used by
/// [`export_skill!`](crate::export_skill); not meant to be named.
#[doc(hidden)]
pub struct SkillExport<S: Skill>(std::marker::PhantomData<S>);

impl<S: Skill> bindings::exports::tollgate::skill::runner::Guest for SkillExport<S> {
    fn describe() -> Description {
        S::describe()
    }

    fn run(ctx: CallContext, input: String) -> Result<String, SkillError> {
        S::run(ctx, &input)
    }
}

/// Export a [`Skill`] as this component's `tollgate:skill/runner` interface.
/// Call it exactly once, in the skill's `cdylib` crate:
/// `tollgate_plugin_sdk::export_skill!(MySkill);`.
#[macro_export]
macro_rules! export_skill {
    ($skill:ty) => {
        const _: () = {
            type __TollgateSkill = $crate::skill::SkillExport<$skill>;
            #[cfg(target_family = "wasm")]
    $crate::skill::bindings::export!(__TollgateSkill with_types_in $crate::skill::bindings);
        };
    };
}
