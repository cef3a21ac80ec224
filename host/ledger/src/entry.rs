//! What the journal records for each settlement: everything the writer needs
//! to apply it to the database later, exactly once, on this gateway or after
//! its restart: the posting, whose grant it leaves, and the request-log row.

use serde::{Deserialize, Serialize};

use super::log_row::{RequestLogRow, Settlement};
use tollgate_core::money::Nanos;

/// One settled request (or a row that moves no money: a tool call, a skill
/// or actor run, a budget alert).
#[derive(Debug, Serialize, Deserialize)]
pub struct Entry {
    /// The gateway run (its `wallet_holds` holder) whose grant the posting
    /// leaves: a journal replayed after a restart posts from the grant of
    /// the run that answered.
    pub holder: String,
    /// The wallet charged, when a hold was settled.
    pub wallet: Option<String>,
    /// What was posted (0 voids the hold).
    pub posted: Nanos,
    pub settled_at_ms: i64,
    /// The gateway's CloudEvents `source` when it answered.
    pub source: String,
    /// The row, with the outcome settlement decided.
    pub log: RequestLogRow,
}

impl Entry {
    /// The row as the request log stores it.
    pub(crate) fn settlement(&self) -> Settlement<'_> {
        Settlement {
            cost: self.posted,
            outcome: &self.log.outcome,
            settled_at_ms: self.settled_at_ms,
            source: &self.source,
        }
    }

    /// The posting this entry makes, if any: one per request, under the
    /// request's own id.
    pub(crate) fn posting(&self) -> Option<(&str, i64)> {
        match &self.wallet {
            Some(wallet) if self.posted.0 > 0 => Some((wallet, self.posted.0)),
            _ => None,
        }
    }
}
