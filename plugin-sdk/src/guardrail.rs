//! Guardrails (feature `guardrail`): implement [`Guardrail`], export it with
//! [`export_guardrail!`](crate::export_guardrail).
//!
//! ```ignore
//! use tollgate_plugin_sdk::guardrail::{CallContext, Description, Guardrail, RequestVerdict, Subject, Text};
//!
//! pub struct NoShouting;
//!
//! impl Guardrail for NoShouting {
//!     fn describe() -> Description {
//!         Description::new("no-shouting", "Refuses prompts written in capitals.").requests()
//!     }
//!
//!     fn check_request(_ctx: CallContext, _subject: Subject, _request: &str, texts: Vec<Text>) -> RequestVerdict {
//!         match texts.iter().find(|t| t.content.len() > 8 && t.content == t.content.to_uppercase()) {
//!             Some(_) => RequestVerdict::Deny("please do not shout".into()),
//!             None => RequestVerdict::Allow,
//!         }
//!     }
//! }
//!
//! tollgate_plugin_sdk::export_guardrail!(NoShouting);
//! ```
//!
//! The host calls only the hooks [`Description`] names. A guardrail sees the
//! texts of a request and of its answer, never the caller's key or the
//! provider's; it reaches the network only through origins its install
//! grants ([`http`]), and models only through the gateway's metered pipeline
//! ([`models`], billed to the caller).

/// Raw bindings generated from `wit/guardrail/0.1.0` (and the host
/// interfaces it imports). Guardrails use the re-exports of this module.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: ["../wit/host/0.1.0", "../wit/guardrail/0.1.0"],
        world: "tollgate:guardrail/guardrail@0.1.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::guardrail::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::exports::tollgate::guardrail::checks::{
    Description, RequestVerdict, ResponseVerdict, Rewrite, Route, Subject, Text,
};
pub use bindings::tollgate::host::models::ModelError;
pub use bindings::tollgate::host::types::CallContext;

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
}

/// Outbound HTTP to the origins the install grants (`tollgate:host/http`).
pub mod http {
    pub use super::bindings::tollgate::host::http::{Error, Request, Response, send};
}

/// Model calls through the gateway's metered pipeline (`tollgate:host/models`),
/// billed to the caller: an LLM judge.
pub mod models {
    use super::ModelError;

    /// A chat completion: `request` is an OpenAI chat-completions body; the
    /// answer is the `chat.completion` object, with `usage.cost`.
    pub fn chat(request: &serde_json::Value) -> Result<serde_json::Value, ModelError> {
        let answer = super::bindings::tollgate::host::models::chat(&request.to_string())?;
        serde_json::from_str(&answer).map_err(|e| ModelError {
            status: 502,
            code: "invalid_answer".into(),
            message: format!("the gateway's answer is not JSON: {e}"),
        })
    }
}

/// A guardrail: what it checks, and the checks.
pub trait Guardrail: 'static {
    fn describe() -> Description;

    /// Checks a request's texts before anything is held or sent. The
    /// default allows everything.
    fn check_request(ctx: CallContext, subject: Subject, request: &str, texts: Vec<Text>) -> RequestVerdict {
        let _ = (ctx, subject, request, texts);
        RequestVerdict::Allow
    }

    /// Checks an answer's texts (one per choice), or a stream's window of
    /// them (`done` on the last). The default allows everything.
    fn check_response(
        ctx: CallContext,
        subject: Subject,
        request: &str,
        memo: Option<String>,
        texts: Vec<String>,
        done: bool,
    ) -> ResponseVerdict {
        let _ = (ctx, subject, request, memo, texts, done);
        ResponseVerdict::Allow
    }
}

impl Description {
    /// A description with no hooks; add them with [`requests`](Self::requests)
    /// and [`responses`](Self::responses).
    pub fn new(name: &str, description: &str) -> Self {
        Description {
            name: name.into(),
            description: description.into(),
            checks_requests: false,
            checks_responses: false,
        }
    }

    pub fn requests(mut self) -> Self {
        self.checks_requests = true;
        self
    }

    pub fn responses(mut self) -> Self {
        self.checks_responses = true;
        self
    }
}

/// Adapts a [`Guardrail`] to the generated `Guest` trait. Used by
/// [`export_guardrail!`](crate::export_guardrail); not meant to be named.
#[doc(hidden)]
pub struct GuardrailExport<G: Guardrail>(std::marker::PhantomData<G>);

impl<G: Guardrail> bindings::exports::tollgate::guardrail::checks::Guest for GuardrailExport<G> {
    fn describe() -> Description {
        G::describe()
    }

    fn check_request(ctx: CallContext, subject: Subject, request: String, texts: Vec<Text>) -> RequestVerdict {
        G::check_request(ctx, subject, &request, texts)
    }

    fn check_response(
        ctx: CallContext,
        subject: Subject,
        request: String,
        memo: Option<String>,
        texts: Vec<String>,
        done: bool,
    ) -> ResponseVerdict {
        G::check_response(ctx, subject, &request, memo, texts, done)
    }
}

/// Export a [`Guardrail`] as this component's `tollgate:guardrail/checks`
/// interface. Call it exactly once, in the guardrail's `cdylib` crate:
/// `tollgate_plugin_sdk::export_guardrail!(MyGuardrail);`.
#[macro_export]
macro_rules! export_guardrail {
    ($guardrail:ty) => {
        const _: () = {
            type __TollgateGuardrail = $crate::guardrail::GuardrailExport<$guardrail>;
            #[cfg(target_family = "wasm")]
    $crate::guardrail::bindings::export!(__TollgateGuardrail with_types_in $crate::guardrail::bindings);
        };
    };
}
