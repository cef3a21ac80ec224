//! The `models` capability: a skill's chat completions go through the
//! server's metered pipeline ([`ModelAccess`](crate::ModelAccess)), bound to
//! the caller's key and wallet, within the call's remaining wall time.

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
