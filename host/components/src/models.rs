//! The `models` capability: the chat completions of a skill, a guardrail
//! that asked for models, or a tool server on tool WIT 0.4.0 go through the
//! server's metered pipeline ([`ModelAccess`](crate::ModelAccess)), bound to
//! the caller's key and wallet, within the call's remaining wall time, and
//! at most `components.max_model_calls` of them per call.

use crate::bindings::ModelError;
use crate::bindings::skill::tollgate::host::models::Host;
use crate::state::CallState;

impl Host for CallState {
    fn chat(&mut self, request: String) -> Result<String, ModelError> {
        let Some(models) = self.capabilities.models.clone() else {
            return Err(ModelError {
                status: 403,
                code: "capability_not_granted".into(),
                message: "this component may not call models".into(),
            });
        };
        let cap = self.limits.max_model_calls;
        if self.model_calls >= cap {
            return Err(ModelError {
                status: 429,
                code: "model_call_limit".into(),
                message: format!("a component call may make at most {cap} model calls (components.max_model_calls)"),
            });
        }
        self.model_calls += 1;
        self.block_on(self.remaining(), models.chat(request))
            .unwrap_or_else(|| {
                Err(ModelError {
                    status: 504,
                    code: "timeout".into(),
                    message: format!(
                        "the model call did not finish within the component's {} ms",
                        self.limits.wall_ms
                    ),
                })
            })
    }
}
