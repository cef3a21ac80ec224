//! The wallet ledger, with TigerBeetle-style two-phase transfers: `reserve`
//! (a pending hold) before the upstream call, then `settle`, which posts an amount
//! no larger than the hold and releases it, or voids it. A sweeper expires holds
//! whose deadline passed; a late settle then fails cleanly.
//!
//! Reserves and settles go through one writer task that group-commits many of
//! them per transaction (see `writer.rs`): the database is not a per-request
//! round trip, yet every reply is sent only after its transaction committed.
//! A reserve is a single conditional UPDATE (`… WHERE balance − reserved ≥ amount`),
//! never a read followed by a write, so concurrent gateways cannot overspend.

mod admin;
mod sweeper;
mod writer;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

pub use admin::{
    ActorRunRow, UsageQuery, UsageRow, WalletBalances, actor_run, credit, journal_credit, open_wallet, request_log,
    usage, verify, wallet,
};
pub use sweeper::sweep;
pub use writer::{RequestKind, RequestLogRow, RunProvenance};

use tollgate_core::db::Database;
use tollgate_core::money::Nanos;

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
    /// SQLite commit durability: `full` (fsync per commit) or `normal`.
    pub sqlite_sync: tollgate_core::db::SqliteSync,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            default_max_output_tokens: 4096,
            reservation_ttl_secs: 900,
            sweep_interval_ms: 5_000,
            max_batch: 256,
            sqlite_sync: tollgate_core::db::SqliteSync::Full,
        }
    }
}

/// A pending hold on a wallet.
#[derive(Clone, Debug)]
pub struct Hold {
    pub id: String,
    pub workspace_id: String,
    pub amount: Nanos,
    pub snapshot_id: i64,
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
    ttl: Duration,
}

impl Ledger {
    /// Starts the writer and the expiry sweeper on the current runtime. Every
    /// request log row names `source`, the serving gateway; `settled` is woken
    /// after settlements commit (the metering dispatchers read those rows).
    pub fn start(
        database: Database,
        config: &LedgerConfig,
        source: String,
        settled: Option<crate::SettleNotifier>,
    ) -> Self {
        let (commands, receiver) = mpsc::channel(4096);
        tokio::spawn(writer::run(
            database.clone(),
            receiver,
            config.max_batch.max(1),
            writer::Stamp { source, settled },
        ));
        tokio::spawn(sweeper::run(
            database,
            Duration::from_millis(config.sweep_interval_ms.max(10)),
        ));
        Self {
            commands,
            ttl: Duration::from_secs(config.reservation_ttl_secs),
        }
    }

    /// Places a hold of `amount` on the workspace's wallet, priced from
    /// `snapshot_id`. Fails with [`ReserveError::Insufficient`] without touching
    /// the wallet when the available balance is short.
    pub async fn reserve(&self, workspace_id: &str, amount: Nanos, snapshot_id: i64) -> Result<Hold, ReserveError> {
        let hold = Hold {
            id: tollgate_core::db::new_id("res"),
            workspace_id: workspace_id.to_string(),
            amount,
            snapshot_id,
        };
        let expires_at_ms = tollgate_core::db::now_ms() + self.ttl.as_millis() as i64;
        let (reply, answer) = oneshot::channel();
        self.send(writer::Command::Reserve {
            hold: hold.clone(),
            expires_at_ms,
            reply,
        })
        .await?;
        match answer.await {
            Ok(Ok(())) => Ok(hold),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ReserveError::Unavailable("ledger writer stopped".into())),
        }
    }

    /// Posts `amount` (clamped to the hold) and releases the hold, or voids it
    /// when `amount` is zero, and writes the request log row, all in one
    /// transaction. Without a hold only the log row is written.
    pub async fn settle(&self, hold: Option<Hold>, amount: Nanos, log: RequestLogRow) -> Result<Settled, ReserveError> {
        let (reply, answer) = oneshot::channel();
        self.send(writer::Command::Settle {
            hold,
            amount,
            log: Box::new(log),
            reply,
            linger: false,
        })
        .await?;
        answer
            .await
            .unwrap_or_else(|_| Err(ReserveError::Unavailable("ledger writer stopped".into())))
    }

    /// Logs a row that moves no money (a tool call, a skill run, an actor
    /// run) for a caller that does not wait on it: it may share the next
    /// command's commit, up to `writer::LINGER` later. Resolves when it is
    /// committed.
    pub async fn log(&self, log: RequestLogRow) -> Result<Settled, ReserveError> {
        let (reply, answer) = oneshot::channel();
        self.send(writer::Command::Settle {
            hold: None,
            amount: Nanos::ZERO,
            log: Box::new(log),
            reply,
            linger: true,
        })
        .await?;
        answer
            .await
            .unwrap_or_else(|_| Err(ReserveError::Unavailable("ledger writer stopped".into())))
    }

    async fn send(&self, command: writer::Command) -> Result<(), ReserveError> {
        self.commands
            .send(command)
            .await
            .map_err(|_| ReserveError::Unavailable("ledger writer stopped".into()))
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
