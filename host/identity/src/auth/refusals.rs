//! Request-log rows for requests refused at authentication (401, 403, and 429
//! over the key's rate), so that these too leave a trace that `tollgate
//! request ID` shows (spec §1.11). Nothing of the request is kept but its id,
//! the outcome and, when the key is known, the key and its workspace; the body
//! was never read.
//!
//! A flood of bad requests must not fill the disk, so the rows are budgeted:
//! [`ROWS_PER_MINUTE`] per key, and as many for all unknown callers together.
//! A refusal past the budget is still answered, only not logged.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tollgate_ledger::{Ledger, RequestKind, RequestLogRow};

use super::Principal;
use tollgate_web::error::ApiError;

/// Logged refusals a minute per key, and for unknown callers together (with
/// bursts of as many).
pub const ROWS_PER_MINUTE: NonZeroU32 = NonZeroU32::new(60).unwrap();

/// Drop idle keys from the budget every this many refusals.
const HOUSEKEEPING_EVERY: u64 = 4096;

pub struct RefusalLog {
    ledger: Ledger,
    /// Keyed by key id; `None` is every caller without a known key.
    budget: DefaultKeyedRateLimiter<Option<String>>,
    refusals: AtomicU64,
}

impl RefusalLog {
    pub fn new(ledger: Ledger) -> Self {
        Self {
            ledger,
            budget: RateLimiter::keyed(Quota::per_minute(ROWS_PER_MINUTE)),
            refusals: AtomicU64::new(0),
        }
    }

    /// Logs `error`, refused to `principal` (`None`: the key was missing,
    /// unknown or revoked), if the caller's budget allows.
    pub async fn record(&self, error: &ApiError, principal: Option<&Principal>) {
        let Some(request_id) = &error.request_id else { return };
        if self.refusals.fetch_add(1, Ordering::Relaxed) % HOUSEKEEPING_EVERY == HOUSEKEEPING_EVERY - 1 {
            self.budget.retain_recent();
        }
        let key_id = principal.map(|p| p.key_id.clone());
        if self.budget.check_key(&key_id).is_err() {
            return;
        }
        let row = RequestLogRow {
            outcome: error.code.to_string(),
            status: Some(error.status.as_u16()),
            started_at_ms: tollgate_core::db::now_ms(),
            ..RequestLogRow::unbilled(
                RequestKind::Chat,
                request_id.clone(),
                key_id.unwrap_or_default(),
                principal.map(|p| p.workspace_id.clone()).unwrap_or_default(),
                String::new(),
            )
        };
        if let Err(failure) = self.ledger.log(row).await {
            tracing::warn!(%request_id, %failure, "could not log a request refused at authentication");
        }
    }
}
