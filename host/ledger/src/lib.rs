//! The wallet ledger, with two-phase holds: `reserve` (a hold) before the
//! upstream call, then `settle`, which posts an amount no larger than the hold
//! and releases it, or voids it.
//!
//! Holds live in memory (see `book.rs`): each gateway escrows part of a
//! wallet's balance in the database (a grant, recorded in `wallet_holds` and
//! counted in `wallets.reserved_nano`) and reserves against it with no I/O.
//! When a grant runs short the writer asks the database for more with one
//! conditional UPDATE (`… WHERE balance − reserved ≥ amount`), never a read
//! followed by a write, so gateways sharing a database cannot overspend. A
//! rich wallet is leased in slices; a nearly empty one is reserved request by
//! request, exactly as much as each needs.
//!
//! A settlement is appended to a local journal (see `journal/`) before its
//! answer leaves, and one writer task applies the journal to the database in
//! the background, many settlements per transaction (see `writer.rs`): an
//! answered request's posting and usage row are durable before the answer,
//! and the answer never waits on the database. A crash loses only holds of
//! requests that had not settled: their gateway's rows expire and the sweeper
//! hands the grant back, unbilled — never a double charge, never an
//! overspend. The journal's tail is applied at the next start.
#![forbid(unsafe_code)]

mod admin;
pub mod archive;
mod batch_insert;
mod book;
mod entry;
mod holds;
pub mod journal;
mod json_text;
mod log_row;
mod record;
mod sql;
mod sweeper;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

pub use admin::{
    ActorRunRow, Spend, UsageQuery, UsageRow, Views, WalletBalances, actor_run, credit, credit_in, debit_in,
    journal_credit, open_wallet, request_log, spend, usage, verify, wallet,
};
pub use journal::{Durability, JournalHealth};
pub use json_text::JsonText;
pub use log_row::{RequestKind, RequestLogRow, RunProvenance, StoredAttempt, UsageSource, expand_attempts};
pub use sweeper::sweep;

use tollgate_core::db::{Database, now_ms};
use tollgate_core::money::Nanos;

/// How many times a reserve asks the writer to grow the wallet's grant before
/// it gives up with 503 `ledger_unavailable`.
const GROW_ATTEMPTS: usize = 32;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LedgerConfig {
    /// Reserve and settle against wallets. Off only for benchmarks and trusted
    /// single-tenant setups: requests are then neither limited nor billed.
    pub enabled: bool,
    /// Output-token cap the gateway sends upstream when a request sets none, so
    /// the actual cost cannot exceed the reservation.
    pub default_max_output_tokens: u32,
    /// How long a hold may stay pending before the sweeper releases it.
    pub reservation_ttl_secs: u64,
    /// How often the sweeper looks for expired holds.
    pub sweep_interval_ms: u64,
    /// Most reserves/settles committed in one transaction.
    pub max_batch: usize,
    /// SQLite commit durability: `normal` (a commit survives the process
    /// dying; a power loss may undo the last commits) or `full` (an fsync per
    /// commit, which also survives a power loss).
    pub sqlite_sync: tollgate_core::db::SqliteSync,
    /// When a settlement counts as durable before its answer leaves: `normal`
    /// (written to the local journal: it survives the gateway being killed)
    /// or `full` (the journal is also fsynced, one fsync per group of
    /// answers: it survives a power loss).
    pub sync: Durability,
    /// Where the journal lives; `<data_dir>/journal` when unset. It must be
    /// on the gateway's own disk, one directory per gateway.
    pub journal_dir: Option<PathBuf>,
    /// The largest slice of a wallet one gateway escrows at a time (decimal
    /// USD); "0" reserves every request directly in the database.
    pub lease_max_usd: String,
    /// A grant with nothing in flight for this long goes back to the wallet.
    pub lease_idle_ms: u64,
    /// How long a gateway's grants outlive it if it dies (it refreshes them
    /// while it lives); never longer than `reservation_ttl_secs`.
    pub lease_ttl_secs: u64,
}

impl LedgerConfig {
    fn lease_policy(&self) -> anyhow::Result<holds::LeasePolicy> {
        let max = Nanos::from_usd(&self.lease_max_usd).map_err(|e| anyhow::anyhow!("ledger.lease_max_usd: {e}"))?;
        Ok(holds::LeasePolicy { max })
    }

    fn row_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_secs.min(self.reservation_ttl_secs).max(1))
    }
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            default_max_output_tokens: 4096,
            reservation_ttl_secs: 900,
            sweep_interval_ms: 5_000,
            max_batch: 256,
            sqlite_sync: tollgate_core::db::SqliteSync::Normal,
            sync: Durability::Normal,
            journal_dir: None,
            lease_max_usd: "100".into(),
            lease_idle_ms: 2_000,
            lease_ttl_secs: 30,
        }
    }
}

/// A pending hold on a wallet.
#[derive(Clone, Debug)]
pub struct Hold {
    pub workspace_id: String,
    pub amount: Nanos,
    pub snapshot_id: i64,
    /// Settled after this, the hold is gone: nothing is billed.
    deadline: Instant,
}

#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    #[error("insufficient balance: {needed} USD needed, {available} USD available")]
    Insufficient { needed: Nanos, available: Nanos },
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
}

/// What happened to a hold at settlement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// The amount was posted (0 means the hold was voided).
    Posted,
    /// The hold was no longer pending (expired by the sweeper): nothing billed.
    HoldGone,
    /// No hold was taken (ledger disabled or the request was refused).
    NoHold,
}

#[derive(Clone)]
pub struct Ledger {
    commands: mpsc::Sender<writer::Command>,
    book: Arc<book::Book>,
    journal: Arc<journal::Journal>,
    ttl: Duration,
    /// This gateway run's name on its `wallet_holds` rows.
    holder: Arc<str>,
    /// This gateway's CloudEvents `source`, stamped on every request log row.
    source: Arc<str>,
}

/// How long a read of the ledger waits for the journal to be applied, so a
/// caller reading right after an answer sees it; past it the read shows the
/// database as it is (it may be away).
const READ_WAIT: Duration = Duration::from_secs(2);

impl Ledger {
    /// Opens the journal in `journal_dir`, starts the writer, its ticker and
    /// the expiry sweeper on the current runtime, and returns once the
    /// journal left by the last run is applied. Every request log row names
    /// `source`, the serving gateway; `settled` is woken after settlements
    /// reach the database (the metering dispatchers read those rows).
    pub async fn start(
        database: Database,
        config: &LedgerConfig,
        journal_dir: &Path,
        source: String,
        settled: Option<crate::SettleNotifier>,
    ) -> anyhow::Result<Self> {
        let (journal, recovered) = journal::Journal::open(journal_dir, config.sync)?;
        let applied: Option<i64> =
            sqlx::query_scalar("SELECT applied_seq FROM ledger_journal_marks WHERE journal_id = $1")
                .bind(journal.id())
                .fetch_optional(&database.pool)
                .await?;
        let applied = applied.map_or(0, |seq| seq as u64);
        let backlog = journal.appended().saturating_sub(applied);
        if backlog > 0 {
            tracing::info!(
                backlog,
                records = recovered.records,
                "applying the ledger journal left by the last run"
            );
        }
        let (commands, receiver) = mpsc::channel(4096);
        let book = Arc::new(book::Book::default());
        let holder = tollgate_core::db::new_id("gw");
        let row_ttl = config.row_ttl();
        let store = writer::Store::open(&database)?;
        journal.mark_applied(applied.min(journal.appended()));
        tokio::spawn(writer::run(
            writer::Writer {
                database: database.clone(),
                book: book.clone(),
                holder: holder.clone(),
                policy: config.lease_policy()?,
                row_ttl,
                settled,
                max_batch: config.max_batch.max(1),
                journal: journal.clone(),
            },
            store,
            receiver,
            journal::Tail::after(journal.dir(), applied),
        ));
        tokio::spawn(tick(
            commands.clone(),
            row_ttl / 3,
            Duration::from_millis(config.lease_idle_ms.max(10)),
        ));
        tokio::spawn(sweeper::run(
            database,
            holder.clone(),
            Duration::from_millis(config.sweep_interval_ms.max(10)),
            row_ttl,
        ));
        // Serve only once what the last run answered is in the database.
        while !journal.caught_up(Duration::from_secs(5)).await {
            tracing::warn!(
                lag = journal.health().lag,
                "still applying the ledger journal left by the last run"
            );
        }
        Ok(Self {
            commands,
            book,
            journal,
            ttl: Duration::from_secs(config.reservation_ttl_secs),
            holder: holder.into(),
            source: source.into(),
        })
    }

    /// Places a hold of `amount` on the workspace's wallet, priced from
    /// `snapshot_id`. Fails with [`ReserveError::Insufficient`] without touching
    /// the wallet when the available balance is short. Within this gateway's
    /// grant it does no I/O.
    pub async fn reserve(&self, workspace_id: &str, amount: Nanos, snapshot_id: i64) -> Result<Hold, ReserveError> {
        // The writer holds the amount out of a fresh grant for the reserve
        // that asked; a retry is needed only when the grant could not grow
        // enough for everyone asking at once, or when reserves on other
        // threads took the room while the grant's commit was under way (seen
        // with hundreds of reserves on one wallet on a loaded machine). Each
        // try grows the grant again, and a wallet that runs dry ends the loop
        // with `Insufficient`, so the bound only guards against starvation.
        for _ in 0..GROW_ATTEMPTS {
            match self.book.try_hold(workspace_id, amount) {
                Ok(needs_write) => {
                    if needs_write {
                        // Shown with the next commit; never waited on.
                        let _ = self.commands.try_send(writer::Command::Flush);
                    }
                    return Ok(Hold {
                        workspace_id: workspace_id.to_string(),
                        amount,
                        snapshot_id,
                        deadline: Instant::now() + self.ttl,
                    });
                }
                Err(book::Shortfall) => {
                    let (reply, answer) = oneshot::channel();
                    let mut waiting = GrowWait {
                        answer,
                        book: &self.book,
                        workspace_id,
                        amount,
                    };
                    self.send(writer::Command::Grow {
                        workspace_id: workspace_id.to_string(),
                        amount,
                        reply,
                    })
                    .await?;
                    let granted = (&mut waiting.answer)
                        .await
                        .unwrap_or_else(|_| Err(ReserveError::Unavailable("ledger writer stopped".into())))?;
                    if granted == writer::Granted::Held {
                        return Ok(Hold {
                            workspace_id: workspace_id.to_string(),
                            amount,
                            snapshot_id,
                            deadline: Instant::now() + self.ttl,
                        });
                    }
                }
            }
        }
        Err(ReserveError::Unavailable(
            "the wallet's grant kept running out under contention; try again".into(),
        ))
    }

    /// Posts `amount` (clamped to the hold) and releases the hold, or voids it
    /// when `amount` is zero, and writes the request log row: all of it one
    /// journal record, applied to the database later in one transaction.
    /// Without a hold only the log row is written. Returns once the record is
    /// in the journal, never waiting on the database.
    pub async fn settle(
        &self,
        hold: Option<Hold>,
        amount: Nanos,
        mut log: RequestLogRow,
    ) -> Result<Settled, ReserveError> {
        let (settled, posted) = match &hold {
            None => (Settled::NoHold, 0),
            Some(hold) if Instant::now() > hold.deadline => (Settled::HoldGone, 0),
            Some(hold) => (Settled::Posted, amount.0.clamp(0, hold.amount.0)),
        };
        if settled == Settled::HoldGone {
            log.outcome = format!("{} (hold expired before settlement: not billed)", log.outcome);
        }
        let entry = entry::Entry {
            holder: self.holder.to_string(),
            wallet: hold.as_ref().map(|hold| hold.workspace_id.clone()),
            posted: Nanos(posted),
            settled_at_ms: now_ms(),
            source: self.source.to_string(),
            log,
        };
        let payload = serde_json::to_vec(&entry).map_err(|e| ReserveError::Unavailable(e.to_string()))?;
        let appended = self.journal.append(&payload, || {
            if let Some(hold) = &hold {
                self.book.settled(&hold.workspace_id, hold.amount, posted);
            }
        });
        match appended {
            Ok(_) => Ok(settled),
            Err(error) => {
                tracing::error!(%error, "the ledger journal could not take a settlement");
                // Nothing was posted: the grant keeps the amount.
                if let Some(hold) = &hold {
                    self.book.drop_hold(&hold.workspace_id, hold.amount);
                }
                Err(ReserveError::Unavailable(format!("ledger journal: {error}")))
            }
        }
    }

    /// Logs a row that moves no money (a tool call, a skill run, an actor
    /// run), exactly as [`Ledger::settle`] does without a hold.
    pub async fn log(&self, log: RequestLogRow) -> Result<Settled, ReserveError> {
        self.settle(None, Nanos::ZERO, log).await
    }

    /// Waits (a bounded time) until every settlement answered before the call
    /// is in the database, so that a read right after an answer shows it.
    pub async fn caught_up(&self) -> bool {
        self.journal.caught_up(READ_WAIT).await
    }

    /// The journal's lag and whether the database is reachable.
    pub fn health(&self) -> JournalHealth {
        self.journal.health()
    }

    /// Hands every grant with nothing in flight back to its wallet: call it
    /// once requests have drained, at shutdown.
    pub async fn release_grants(&self) {
        // A grant whose postings are still in the journal is not idle.
        self.journal.caught_up(Duration::from_secs(5)).await;
        let (done, finished) = oneshot::channel();
        if self
            .send(writer::Command::Tick {
                idle: None,
                refresh: false,
                done: Some(done),
            })
            .await
            .is_ok()
        {
            let _ = finished.await;
        }
    }

    async fn send(&self, command: writer::Command) -> Result<(), ReserveError> {
        self.commands
            .send(command)
            .await
            .map_err(|_| ReserveError::Unavailable("ledger writer stopped".into()))
    }
}

/// A reserve waiting for the writer to grow a grant. If the reserve is
/// dropped (its request went away) after the writer held its amount, the
/// hold goes back to the grant instead of being lost to it.
struct GrowWait<'a> {
    answer: oneshot::Receiver<Result<writer::Granted, ReserveError>>,
    book: &'a book::Book,
    workspace_id: &'a str,
    amount: Nanos,
}

impl Drop for GrowWait<'_> {
    fn drop(&mut self) {
        if let Ok(Ok(writer::Granted::Held)) = self.answer.try_recv() {
            self.book.drop_hold(self.workspace_id, self.amount);
        }
    }
}

/// Asks the writer to hand back grants idle for `idle` (checked as often),
/// and every `refresh` to refresh this gateway's rows before they expire. A
/// tick with nothing to do does no I/O.
async fn tick(commands: mpsc::Sender<writer::Command>, refresh: Duration, idle: Duration) {
    let mut interval = tokio::time::interval(idle.min(refresh));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut refreshed = Instant::now();
    loop {
        interval.tick().await;
        let due = refreshed.elapsed() >= refresh;
        if due {
            refreshed = Instant::now();
        }
        let command = writer::Command::Tick {
            idle: Some(idle),
            refresh: due,
            done: None,
        };
        if commands.send(command).await.is_err() {
            return;
        }
    }
}

/// Wakes whoever follows the request log (metering's dispatchers) when
/// settlements commit, so events go out without waiting for the next poll.
#[derive(Clone)]
pub struct SettleNotifier {
    wake: std::sync::Arc<tokio::sync::Notify>,
}

impl SettleNotifier {
    pub fn new(wake: std::sync::Arc<tokio::sync::Notify>) -> Self {
        Self { wake }
    }

    pub fn notify(&self) {
        self.wake.notify_waiters();
    }
}
