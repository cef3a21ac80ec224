//! The gateway's wallet book: per wallet, the money this gateway has escrowed
//! in the database (its grant) and how much of it requests in flight hold.
//! A reserve that fits the grant is a check-and-add under a lock, with no I/O;
//! only the writer changes a grant, and only after its transaction committed,
//! so the book never lets a request hold money the database has not set aside.
//!
//! Per wallet, `held ≤ granted` always:
//! - `held`: holds of requests in flight;
//! - `granted`: what the database reserves for this gateway (`wallet_holds`),
//!   less the postings already journaled but not yet applied (`applying`):
//!   a settlement takes its posting out of the grant as soon as it is in the
//!   journal, so it cannot be lent again while the database catches up.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use tollgate_core::money::Nanos;

#[derive(Default)]
pub struct Book {
    wallets: Mutex<HashMap<String, Wallet>>,
}

#[derive(Default, Clone, Copy, Debug)]
pub struct Wallet {
    pub granted: i64,
    pub held: i64,
    /// Journaled postings not yet applied to the database: the row's grant
    /// still counts them.
    pub applying: i64,
    /// `held` changed since the writer last wrote this wallet's row.
    pub dirty: bool,
    /// The last reserve, for returning an idle grant.
    pub last_reserve: Option<Instant>,
    /// The grant is a lease (kept for later requests); otherwise it is
    /// trimmed back to what is in flight at every commit.
    pub lease: bool,
}

impl Wallet {
    fn room(&self) -> i64 {
        self.granted - self.held
    }

    /// Nothing in flight, and no reserve since `since` (`None`: at all).
    fn is_idle(&self, since: Option<Instant>) -> bool {
        self.held == 0 && self.applying == 0 && since.is_none_or(|since| self.last_reserve.is_none_or(|at| at < since))
    }
}

/// A reserve the grant could not cover.
pub struct Shortfall;

impl Book {
    /// Holds `amount` on the wallet if its grant has room. Returns whether the
    /// wallet's row needs a write to show the new hold (it was clean).
    pub fn try_hold(&self, workspace_id: &str, amount: Nanos) -> Result<bool, Shortfall> {
        let mut wallets = self.wallets.lock().expect("book lock");
        let wallet = match wallets.get_mut(workspace_id) {
            Some(wallet) => wallet,
            None => wallets.entry(workspace_id.to_string()).or_default(),
        };
        // A reserve waiting on a grant counts as activity too.
        wallet.last_reserve = Some(Instant::now());
        let room = wallet.room();
        if room < amount.0 {
            return Err(Shortfall);
        }
        wallet.held += amount.0;
        Ok(!std::mem::replace(&mut wallet.dirty, true))
    }

    /// A hold that was never used: its reserve went away before it got it.
    pub fn drop_hold(&self, workspace_id: &str, amount: Nanos) {
        let mut wallets = self.wallets.lock().expect("book lock");
        if let Some(wallet) = wallets.get_mut(workspace_id) {
            wallet.held -= amount.0;
            wallet.dirty = true;
        }
    }

    /// A hold whose settlement is journaled: the hold ends, and what it
    /// posted leaves the grant until the database shows it.
    pub fn settled(&self, workspace_id: &str, hold: Nanos, posted: i64) {
        let mut wallets = self.wallets.lock().expect("book lock");
        if let Some(wallet) = wallets.get_mut(workspace_id) {
            wallet.held -= hold.0;
            wallet.granted -= posted;
            wallet.applying += posted;
            wallet.dirty = true;
        }
    }

    /// After a commit: `applied` of this wallet's journaled postings reached
    /// the database, and the database granted `grown` more (as a lease or
    /// not). Then, under the same lock, holds `asks` in order for the
    /// reserves that asked for the grant, and says which fit.
    pub fn committed(
        &self,
        workspace_id: &str,
        applied: i64,
        grown: i64,
        lease: Option<bool>,
        asks: impl IntoIterator<Item = Nanos>,
    ) -> Vec<bool> {
        let mut wallets = self.wallets.lock().expect("book lock");
        let wallet = wallets.entry(workspace_id.to_string()).or_default();
        wallet.applying -= applied;
        wallet.granted += grown;
        if let Some(lease) = lease {
            wallet.lease = lease;
        }
        debug_assert!(wallet.room() >= 0, "{workspace_id}: {wallet:?}");
        let held: Vec<bool> = asks
            .into_iter()
            .map(|ask| {
                let fits = wallet.room() >= ask.0;
                if fits {
                    wallet.held += ask.0;
                    wallet.last_reserve = Some(Instant::now());
                }
                fits
            })
            .collect();
        if held.contains(&true) {
            wallet.dirty = true;
        }
        held
    }

    /// Before a commit: the wallet's `held` to write, and the slack of a
    /// direct (non-lease) grant, taken out of the grant now so no request can
    /// hold it while the database hands it back. `asked` of the room stays:
    /// grant requests in the same commit count on it.
    pub fn trim_for_commit(&self, workspace_id: &str, asked: i64) -> (i64, i64) {
        let mut wallets = self.wallets.lock().expect("book lock");
        let Some(wallet) = wallets.get_mut(workspace_id) else {
            return (0, 0);
        };
        let trimmed = if wallet.lease {
            0
        } else {
            (wallet.room() - asked).max(0)
        };
        wallet.granted -= trimmed;
        (wallet.held, trimmed)
    }

    /// Turns a lease into a direct grant unless `fair(granted)` holds.
    /// Returns whether it did.
    pub fn end_lease_unless(&self, workspace_id: &str, fair: impl FnOnce(i64) -> bool) -> bool {
        let mut wallets = self.wallets.lock().expect("book lock");
        match wallets.get_mut(workspace_id) {
            Some(wallet) if wallet.lease && !fair(wallet.granted) => {
                wallet.lease = false;
                true
            }
            _ => false,
        }
    }

    /// What the wallet's grant has free now.
    pub fn room(&self, workspace_id: &str) -> i64 {
        let wallets = self.wallets.lock().expect("book lock");
        wallets.get(workspace_id).map_or(0, Wallet::room).max(0)
    }

    /// How much more than its room a reserve of `amount` needs now.
    pub fn shortfall(&self, workspace_id: &str, amount: Nanos) -> i64 {
        let wallets = self.wallets.lock().expect("book lock");
        let room = wallets.get(workspace_id).map_or(0, Wallet::room);
        (amount.0 - room).max(0)
    }

    /// The wallets whose rows need a write, marked clean: what the writer is
    /// about to persist. `all` also takes every wallet with a grant (to
    /// refresh the rows' expiry).
    pub fn take_dirty(&self, all: bool) -> Vec<String> {
        let mut wallets = self.wallets.lock().expect("book lock");
        wallets
            .iter_mut()
            .filter(|(_, w)| w.dirty || (all && w.granted > 0))
            .map(|(id, w)| {
                w.dirty = false;
                id.clone()
            })
            .collect()
    }

    /// Marks a wallet's row as needing a write again (a write failed).
    pub fn mark_dirty(&self, workspace_id: &str) {
        if let Some(wallet) = self.wallets.lock().expect("book lock").get_mut(workspace_id) {
            wallet.dirty = true;
        }
    }

    /// Whether [`Book::take_idle`] would find anything, so that an idle
    /// gateway's ticks need no transaction.
    pub fn any_idle(&self, idle_since: Option<Instant>) -> bool {
        let wallets = self.wallets.lock().expect("book lock");
        wallets.values().any(|w| w.is_idle(idle_since))
    }

    /// Takes back the grants of wallets with nothing in flight, no reserve
    /// since `idle_since` (all idle wallets when `None`) and not `busy` in the
    /// commit at hand, dropping them from
    /// the book before the database returns their grant, so no request can
    /// hold it meanwhile (a new reserve starts from an empty grant).
    pub fn take_idle(&self, idle_since: Option<Instant>, busy: impl Fn(&str) -> bool) -> Vec<(String, i64)> {
        let mut wallets = self.wallets.lock().expect("book lock");
        let mut returned = Vec::new();
        wallets.retain(|id, w| {
            let idle = !busy(id) && w.is_idle(idle_since);
            if idle {
                returned.push((id.clone(), w.granted));
            }
            !idle
        });
        returned
    }

    /// A return that did not commit: the grant is this gateway's again.
    pub fn restore(&self, workspace_id: &str, granted: i64) {
        let mut wallets = self.wallets.lock().expect("book lock");
        wallets.entry(workspace_id.to_string()).or_default().granted += granted;
    }
}
