//! A counter leased from the database in slices: the shape of both the
//! plan's monthly requests (`quota.rs`) and budgets' spend (`budgets/`).
//!
//! The database row counts what gateways have *claimed*, and a claim is one
//! conditional upsert (`claimed + size ≤ limit`, [`Claims::claim`]): the
//! database decides, never a read followed by a write, so gateways sharing
//! it cannot together pass the limit. Far from the limit a gateway claims a
//! slice of several requests' worth and takes from it in memory, with no
//! I/O; near it, it claims exactly what a request needs. What a request does
//! not use goes back into the slice ([`Leased::give_back`]), and a slice
//! unused for a while, or every slice at a graceful shutdown, goes back to
//! the row ([`Leased::return_idle`]). A gateway that dies loses its unused
//! slices: the counter may then refuse early, never let a limit pass.
//!
//! While the database cannot be reached, slices already claimed are still
//! taken from in memory; a take that needs a claim fails (after one attempt
//! per `tollgate_core::outage::RETRY_AFTER`; the others fail at once), so a
//! limit is never passed. An idle slice that cannot be handed back stays in
//! memory, to be spent or handed back later, rather than being lost.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tollgate_core::outage::Outage;

/// The rows a [`Leased`] counter claims from.
pub(crate) trait Claims: Send + Sync {
    /// One row: what the counter counts for (a workspace's month, a budget's
    /// period).
    type Key: Clone + Eq + Hash + Send + Sync;

    /// Claims `size` if the row's claimed total stays within `limit`: the
    /// new total, or `None` when it does not fit.
    async fn claim(&self, key: &Self::Key, size: i64, limit: i64) -> sqlx::Result<Option<i64>>;

    /// Hands `amount` of an unused slice back to the row. On failure the
    /// amount stays claimed: the counter refuses early, never late.
    async fn unclaim(&self, key: &Self::Key, amount: i64) -> sqlx::Result<()>;
}

/// This gateway's claimed-but-untaken part of one row.
struct Slice {
    left: i64,
    /// The row's claimed total after this gateway's last claim.
    seen: i64,
    used: Instant,
    /// Held while claiming, so concurrent requests wait for one claim and
    /// share its slice instead of each claiming a slice of its own.
    claiming: Arc<tokio::sync::Mutex<()>>,
}

impl Slice {
    fn new() -> Self {
        Slice {
            left: 0,
            seen: 0,
            used: Instant::now(),
            claiming: Arc::default(),
        }
    }

    fn take(&mut self, amount: i64) -> bool {
        if self.left < amount {
            return false;
        }
        self.left -= amount;
        self.used = Instant::now();
        true
    }
}

/// A counter whose rows are claimed through `C`, with this gateway's slices.
pub(crate) struct Leased<C: Claims> {
    claims: C,
    slices: Mutex<HashMap<C::Key, Slice>>,
    /// Whether the database answers claims, and the outage's warnings.
    outage: Outage,
}

impl<C: Claims> Leased<C> {
    /// `what` names the counter in the log ("plan request slices").
    pub fn new(claims: C, what: &'static str) -> Self {
        Self {
            claims,
            slices: Mutex::default(),
            outage: Outage::new(what),
        }
    }

    pub fn claims(&self) -> &C {
        &self.claims
    }

    fn slices(&self) -> MutexGuard<'_, HashMap<C::Key, Slice>> {
        self.slices.lock().expect("leased slices poisoned")
    }

    /// Takes `amount` of `key`'s row under `limit`: from this gateway's
    /// slice, else by claiming `slice_size(seen)` (given the row's total as
    /// last seen, and never less than what is missing), else by claiming
    /// exactly what is missing. `false`: it does not fit.
    pub async fn take(
        &self,
        key: &C::Key,
        amount: i64,
        limit: i64,
        slice_size: impl Fn(i64) -> i64,
    ) -> sqlx::Result<bool> {
        let claiming = {
            let mut slices = self.slices();
            let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
            if slice.take(amount) {
                return Ok(true);
            }
            slice.claiming.clone()
        };
        let _claiming = claiming.lock().await;
        loop {
            // A claim made while this request waited may have filled the slice.
            let (left, seen) = {
                let mut slices = self.slices();
                let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
                if slice.take(amount) {
                    return Ok(true);
                }
                (slice.left, slice.seen)
            };
            let need = amount - left;
            let size = need.max(slice_size(seen));
            let mut claimed = self.claim(key, size, limit).await?.map(|total| (total, size));
            if claimed.is_none() && size > need {
                claimed = self.claim(key, need, limit).await?.map(|total| (total, need));
            }
            let mut slices = self.slices();
            let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
            match claimed {
                Some((total, size)) => {
                    slice.left += size;
                    slice.seen = slice.seen.max(total);
                }
                None => {
                    slice.seen = limit;
                    // What was given back meanwhile may still cover it.
                    return Ok(slice.take(amount));
                }
            }
        }
    }

    /// One claim, refused at once while the database is known down.
    async fn claim(&self, key: &C::Key, size: i64, limit: i64) -> sqlx::Result<Option<i64>> {
        let claimed = self.outage.ask(self.claims.claim(key, size, limit)).await;
        if let Err(error) = &claimed
            && tollgate_core::outage::unreachable(error)
        {
            self.outage.note(false, error);
        }
        claimed
    }

    /// Puts `amount` taken and not used back into this gateway's slice, with
    /// no I/O.
    pub fn give_back(&self, key: &C::Key, amount: i64) {
        if amount <= 0 {
            return;
        }
        self.slices().entry(key.clone()).or_insert_with(Slice::new).left += amount;
    }

    /// What this gateway has claimed and not taken, over the rows `which`
    /// picks.
    pub fn unused(&self, which: impl Fn(&C::Key) -> bool) -> i64 {
        self.slices()
            .iter()
            .filter(|(key, _)| which(key))
            .map(|(_, slice)| slice.left)
            .sum()
    }

    /// Hands back the unused part of every slice idle for `idle` (`None`:
    /// every slice, at shutdown).
    pub async fn return_idle(&self, idle: Option<Duration>) {
        let returned: Vec<(C::Key, i64)> = {
            let mut slices = self.slices();
            let done: Vec<C::Key> = slices
                .iter()
                .filter(|(_, slice)| idle.is_none_or(|idle| slice.used.elapsed() >= idle))
                .map(|(key, _)| key.clone())
                .collect();
            done.into_iter()
                .filter_map(|key| slices.remove(&key).map(|slice| (key, slice.left)))
                .filter(|(_, left)| *left > 0)
                .collect()
        };
        for (key, left) in returned {
            let was_down = self.outage.is_down();
            if let Err(error) = self.outage.ask(self.claims.unclaim(&key, left)).await {
                // Once per outage, not once per slice and try.
                if !was_down {
                    tracing::warn!(%error, "could not hand back an unused slice; keeping it to retry");
                }
                self.give_back(&key, left);
            }
        }
    }
}
