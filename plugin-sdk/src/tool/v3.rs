//! What tool WIT 0.3.0 adds (feature `tool-v3`): [`elicitation`], questions
//! a call asks the user of the MCP client it serves.
//!
//! ```ignore
//! use tollgate_plugin_sdk::tool::elicitation::{self, Action};
//!
//! let schema = r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#;
//! match elicitation::elicit("Which city?", schema) {
//!     Ok(answer) if answer.action == Action::Accept => { /* answer.content: the JSON object */ }
//!     Ok(_) => { /* declined or cancelled */ }
//!     Err(error) => { /* no one to ask, refused, failed or timed out: error.message() */ }
//! }
//! ```

/// Questions for the MCP client's user (`tollgate:tool/elicitation`). The
/// host sends them only to the client whose request the call serves, and
/// bounds the wait.
pub mod elicitation {
    pub use super::super::bindings::tollgate::tool::elicitation::{Action, Answer, ElicitError};

    /// Asks `message`, wanting input shaped by `requested_schema` (a JSON
    /// Schema object of flat properties, serialized), and waits for the answer.
    pub fn elicit(message: &str, requested_schema: &str) -> Result<Answer, ElicitError> {
        super::super::bindings::tollgate::tool::elicitation::elicit(message, requested_schema)
    }

    impl ElicitError {
        /// The host's reason, as a sentence.
        pub fn message(&self) -> String {
            match self {
                ElicitError::Unavailable(m) | ElicitError::Invalid(m) => m.clone(),
                ElicitError::Failed(m) => format!("the client answered with an error: {m}"),
                ElicitError::TimedOut => "the client did not answer in time".into(),
            }
        }
    }
}
