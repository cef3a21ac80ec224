//! Admission of an MCP request's calls: each `tools/call` (and each
//! `prompts/get`, `resources/read`, `completion/complete`, which run a
//! component) is admitted against the key's rate and the workspace's plan,
//! as a request of its own would be.

use super::{REFUSED, Scope};

/// The `tools/call`s of one HTTP request: the first was counted against the
/// key's rate when the request was authenticated; each further one counts
/// again. Every one is admitted under the workspace's plan.
#[derive(Default)]
pub(super) struct CallCounter {
    calls: usize,
    pub(super) refused: bool,
}

impl CallCounter {
    pub(super) async fn admit(&mut self, scope: &Scope) -> Result<(), (i64, String)> {
        self.calls += 1;
        let outcome = self.check(scope).await;
        self.refused |= outcome.is_err();
        outcome
    }

    async fn check(&self, scope: &Scope) -> Result<(), (i64, String)> {
        if self.calls > 1
            && let Err(wait) = scope.auth.count_request(&scope.caller)
        {
            let secs = tollgate_web::rate_limit::retry_after_secs(wait);
            return Err((
                REFUSED,
                format!("rate_limited: this API key is over its request rate; retry after {secs} s"),
            ));
        }
        match scope.components.data.admit(&scope.caller).await {
            // Counted: the call is one of the month's requests.
            Ok(_admitted) => Ok(()),
            Err(error @ tollgate_billing::BillingError::LimitReached { .. }) => {
                Err((REFUSED, format!("plan_limit_reached: {error}")))
            }
            Err(error) => {
                tracing::error!(%error, "admitting an MCP tool call");
                Err((REFUSED, "the workspace's plan could not be checked".into()))
            }
        }
    }
}
