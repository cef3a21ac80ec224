//! Tool WIT 0.4.0: 0.3.0 plus the host's `models` import (implemented once,
//! in `models.rs`, for skills, guardrails and these). Its exports have 0.3.0's
//! shapes, converted by the same code; its `progress` and `elicitation`
//! imports are 0.3.0's under a new name, so they are linked to the same host
//! code, their records converted.

use crate::bindings::tool_server_v4::tollgate::tool::elicitation as v4;
use crate::bindings::{ElicitAction, ElicitError};

super::v3::same_shapes!(V4World, tool_server_v4);

impl crate::bindings::tool_server_v4::tollgate::tool::progress::Host for CallState {
    fn report(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        crate::bindings::tool_server_v2::tollgate::tool::progress::Host::report(self, progress, total, message)
    }
}

impl v4::Host for CallState {
    fn elicit(&mut self, message: String, requested_schema: String) -> Result<v4::Answer, v4::ElicitError> {
        let outcome =
            crate::bindings::tool_server_v3::tollgate::tool::elicitation::Host::elicit(self, message, requested_schema);
        match outcome {
            Ok(answer) => Ok(v4::Answer {
                action: match answer.action {
                    ElicitAction::Accept => v4::Action::Accept,
                    ElicitAction::Decline => v4::Action::Decline,
                    ElicitAction::Cancel => v4::Action::Cancel,
                },
                content: answer.content,
            }),
            Err(ElicitError::Unavailable(m)) => Err(v4::ElicitError::Unavailable(m)),
            Err(ElicitError::Invalid(m)) => Err(v4::ElicitError::Invalid(m)),
            Err(ElicitError::Failed(m)) => Err(v4::ElicitError::Failed(m)),
            Err(ElicitError::TimedOut) => Err(v4::ElicitError::TimedOut),
        }
    }
}
