//! The ledger writer: one task that drains queued reserves and settles and
//! commits them together. Replies go out only after the commit, so nothing is
//! acknowledged before it is durable. If a batch fails, its commands are retried
//! one by one, so one bad command cannot fail its neighbours.

use sqlx::{Any, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::{Hold, ReserveError, Settled};
use crate::SettleNotifier;
use tollgate_core::db::{Database, now_ms};
use tollgate_core::money::Nanos;

type Tx = Transaction<'static, Any>;

pub enum Command {
    Reserve {
        hold: Hold,
        expires_at_ms: i64,
        reply: oneshot::Sender<Result<(), ReserveError>>,
    },
    Settle {
        hold: Option<Hold>,
        amount: Nanos,
        log: Box<RequestLogRow>,
        reply: oneshot::Sender<Result<Settled, ReserveError>>,
        /// A row that moves no money and that nobody answers on: it may
        /// wait up to [`LINGER`] to share a commit with the next command.
        linger: bool,
    },
}

/// How long a money-free row written in the background may wait for company:
/// joining the next request's reserve or settle saves a commit (an fsync on
/// SQLite) per tool call, skill run or actor run.
pub const LINGER: std::time::Duration = std::time::Duration::from_millis(10);

fn lingers(command: &Command) -> bool {
    matches!(command, Command::Settle { linger: true, .. })
}

/// One row of the request log: the auditable trace of a request.
#[derive(Debug, Clone)]
pub struct RequestLogRow {
    pub request_id: String,
    pub key_id: String,
    pub workspace_id: String,
    pub model: String,
    pub provider: Option<String>,
    pub upstream_model: Option<String>,
    pub streamed: bool,
    pub outcome: String,
    pub status: Option<u16>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// `upstream` when the provider reported usage, `estimated` when counted locally.
    pub usage_source: &'static str,
    pub reserved: Nanos,
    pub snapshot_id: Option<i64>,
    /// JSON array, as in `service.attempts`.
    pub attempts: String,
    /// How many upstream attempts `attempts` lists.
    pub attempt_count: u32,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// What the row records: a chat request, a tool call, a skill run or an actor run.
    pub kind: RequestKind,
    /// The request this one ran inside (a skill's model or tool call).
    pub parent_request_id: Option<String>,
    /// An actor run's signed provenance trail, kept with its row.
    pub provenance: Option<RunProvenance>,
}

impl RequestLogRow {
    /// A row that bills nothing by itself (a tool call, a skill run, an
    /// actor run: their model calls are rows of their own): no tokens, no
    /// hold, no attempts. Callers fill in what they know with `..`.
    pub fn unbilled(
        kind: RequestKind,
        request_id: String,
        key_id: String,
        workspace_id: String,
        model: String,
    ) -> Self {
        Self {
            request_id,
            key_id,
            workspace_id,
            model,
            provider: None,
            upstream_model: None,
            streamed: false,
            outcome: String::new(),
            status: None,
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            reasoning_tokens: None,
            usage_source: "none",
            reserved: Nanos::ZERO,
            snapshot_id: None,
            attempts: "[]".into(),
            attempt_count: 0,
            started_at_ms: 0,
            duration_ms: 0,
            kind,
            parent_request_id: None,
            provenance: None,
        }
    }
}

/// What an actor run's row carries besides the log: its run id, its trail
/// (JSON) and the trail's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunProvenance {
    pub run_id: String,
    pub trail: String,
    pub signature: String,
}

/// What a request-log row records. Tool calls and skill runs are logged beside
/// chat requests, with their own usage-event types; they post nothing
/// themselves (a skill's model calls are chat requests of their own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RequestKind {
    #[default]
    Chat,
    ToolCall,
    SkillRun,
    ActorRun,
}

impl RequestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Chat => "chat",
            RequestKind::ToolCall => "tool_call",
            RequestKind::SkillRun => "skill_run",
            RequestKind::ActorRun => "actor_run",
        }
    }
}

enum Outcome {
    Reserve(Result<(), ReserveError>),
    Settle(Settled),
}

/// What the writer stamps on every request log row.
pub struct Stamp {
    /// This gateway's CloudEvents `source`.
    pub source: String,
    /// Wakes the metering dispatchers after settlements commit.
    pub settled: Option<SettleNotifier>,
}

pub async fn run(database: Database, mut receiver: mpsc::Receiver<Command>, max_batch: usize, stamp: Stamp) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = receiver.recv().await {
        batch.push(first);
        let deadline = tokio::time::Instant::now() + LINGER;
        loop {
            while batch.len() < max_batch {
                match receiver.try_recv() {
                    Ok(command) => batch.push(command),
                    Err(_) => break,
                }
            }
            if batch.len() >= max_batch || !batch.iter().all(lingers) {
                break;
            }
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(command)) => batch.push(command),
                _ => break,
            }
        }
        match commit(&database, &batch, &stamp.source).await {
            Ok(outcomes) => reply_all(batch.drain(..), outcomes, stamp.settled.as_ref()),
            Err(error) if batch.len() == 1 => fail(batch.pop().expect("one command"), &error),
            Err(error) => {
                tracing::warn!(%error, size = batch.len(), "ledger batch failed; retrying its commands one by one");
                for command in batch.drain(..) {
                    match commit(&database, std::slice::from_ref(&command), &stamp.source).await {
                        Ok(outcomes) => reply_all(std::iter::once(command), outcomes, stamp.settled.as_ref()),
                        Err(error) => fail(command, &error),
                    }
                }
            }
        }
    }
}

async fn commit(database: &Database, commands: &[Command], source: &str) -> sqlx::Result<Vec<Outcome>> {
    let _turn = database.write_turn().await;
    let mut tx = database.begin_write().await?;
    let mut outcomes = Vec::with_capacity(commands.len());
    for command in commands {
        outcomes.push(match command {
            Command::Reserve {
                hold, expires_at_ms, ..
            } => Outcome::Reserve(reserve(&mut tx, hold, *expires_at_ms).await?),
            Command::Settle { hold, amount, log, .. } => {
                Outcome::Settle(settle(&mut tx, hold.as_ref(), *amount, log, source).await?)
            }
        });
    }
    tx.commit().await?;
    Ok(outcomes)
}

fn reply_all(commands: impl Iterator<Item = Command>, outcomes: Vec<Outcome>, settled: Option<&SettleNotifier>) {
    if let Some(settled) = settled
        && outcomes.iter().any(|o| matches!(o, Outcome::Settle(_)))
    {
        settled.notify();
    }
    for (command, outcome) in commands.zip(outcomes) {
        match (command, outcome) {
            (Command::Reserve { reply, .. }, Outcome::Reserve(result)) => {
                let _ = reply.send(result);
            }
            (Command::Settle { reply, .. }, Outcome::Settle(settled)) => {
                let _ = reply.send(Ok(settled));
            }
            _ => unreachable!("outcomes are produced in command order"),
        }
    }
}

fn fail(command: Command, error: &sqlx::Error) {
    tracing::error!(%error, "ledger write failed");
    let unavailable = || ReserveError::Unavailable(error.to_string());
    match command {
        Command::Reserve { reply, .. } => {
            let _ = reply.send(Err(unavailable()));
        }
        Command::Settle { reply, .. } => {
            let _ = reply.send(Err(unavailable()));
        }
    }
}

async fn reserve(tx: &mut Tx, hold: &Hold, expires_at_ms: i64) -> sqlx::Result<Result<(), ReserveError>> {
    let now = now_ms();
    let updated = sqlx::query(
        "UPDATE wallets SET reserved_nano = reserved_nano + $1 \
         WHERE workspace_id = $2 AND balance_nano - reserved_nano >= $1",
    )
    .bind(hold.amount.0)
    .bind(&hold.workspace_id)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if updated == 0 {
        let available: Option<i64> =
            sqlx::query_scalar("SELECT balance_nano - reserved_nano FROM wallets WHERE workspace_id = $1")
                .bind(&hold.workspace_id)
                .fetch_optional(&mut **tx)
                .await?;
        return Ok(Err(ReserveError::Insufficient {
            needed: hold.amount,
            available: Nanos(available.unwrap_or(0)),
        }));
    }
    sqlx::query(
        "INSERT INTO reservations (id, workspace_id, amount_nano, snapshot_id, state, expires_at, created_at) \
         VALUES ($1, $2, $3, $4, 'pending', $5, $6)",
    )
    .bind(&hold.id)
    .bind(&hold.workspace_id)
    .bind(hold.amount.0)
    .bind(hold.snapshot_id)
    .bind(expires_at_ms)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    journal(
        tx,
        &format!("{}:reserve", hold.id),
        &hold.workspace_id,
        "reserve",
        hold.amount,
        Some(&hold.id),
        now,
    )
    .await?;
    Ok(Ok(()))
}

async fn settle(
    tx: &mut Tx,
    hold: Option<&Hold>,
    amount: Nanos,
    log: &RequestLogRow,
    source: &str,
) -> sqlx::Result<Settled> {
    let now = now_ms();
    let settled = match hold {
        None => Settled::NoHold,
        Some(hold) => {
            let posted = Nanos(amount.0.clamp(0, hold.amount.0));
            let state = if posted.0 > 0 { "posted" } else { "voided" };
            let updated = sqlx::query(
                "UPDATE reservations SET state = $1, posted_nano = $2, settled_at = $3 WHERE id = $4 AND state = 'pending'",
            )
            .bind(state)
            .bind(posted.0)
            .bind(now)
            .bind(&hold.id)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            if updated == 0 {
                Settled::HoldGone
            } else {
                sqlx::query(
                    "UPDATE wallets SET balance_nano = balance_nano - $1, reserved_nano = reserved_nano - $2 \
                     WHERE workspace_id = $3",
                )
                .bind(posted.0)
                .bind(hold.amount.0)
                .bind(&hold.workspace_id)
                .execute(&mut **tx)
                .await?;
                if posted.0 > 0 {
                    journal(
                        tx,
                        &format!("{}:post", hold.id),
                        &hold.workspace_id,
                        "post",
                        posted,
                        Some(&hold.id),
                        now,
                    )
                    .await?;
                }
                journal(
                    tx,
                    &format!("{}:release", hold.id),
                    &hold.workspace_id,
                    "release",
                    hold.amount,
                    Some(&hold.id),
                    now,
                )
                .await?;
                Settled::Posted
            }
        }
    };
    let (billed, outcome) = match settled {
        Settled::HoldGone => (
            Nanos::ZERO,
            format!("{} (hold expired before settlement: not billed)", log.outcome),
        ),
        _ => (
            hold.map_or(Nanos::ZERO, |h| Nanos(amount.0.clamp(0, h.amount.0))),
            log.outcome.clone(),
        ),
    };
    // This row is also the request's usage event (see metering/feed.rs).
    let settlement = Settlement {
        cost: billed,
        outcome: &outcome,
        reservation_id: hold.map(|h| h.id.as_str()),
        settled_at_ms: now,
        source,
    };
    write_log(tx, log, &settlement).await?;
    Ok(settled)
}

pub(super) async fn journal(
    tx: &mut Tx,
    id: &str,
    workspace_id: &str,
    kind: &str,
    amount: Nanos,
    reservation_id: Option<&str>,
    now: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO ledger_entries (id, workspace_id, kind, amount_nano, reservation_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(workspace_id)
    .bind(kind)
    .bind(amount.0)
    .bind(reservation_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// What settlement decided about a request, beside what the request reported.
struct Settlement<'a> {
    cost: Nanos,
    outcome: &'a str,
    reservation_id: Option<&'a str>,
    settled_at_ms: i64,
    source: &'a str,
}

async fn write_log(tx: &mut Tx, log: &RequestLogRow, settlement: &Settlement<'_>) -> sqlx::Result<()> {
    let tokens = |v: Option<u64>| v.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    sqlx::query(
        "INSERT INTO request_log (request_id, key_id, workspace_id, model, provider, upstream_model, streamed, outcome, \
         status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, reserved_nano, \
         snapshot_id, reservation_id, attempts, attempt_count, started_at_ms, duration_ms, settled_at_ms, source, kind, \
         parent_request_id, run_id, provenance, provenance_signature) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, \
         $23, $24, $25, $26, $27, $28, $29) ON CONFLICT (request_id) DO NOTHING",
    )
    .bind(&log.request_id)
    .bind(&log.key_id)
    .bind(&log.workspace_id)
    .bind(&log.model)
    .bind(&log.provider)
    .bind(&log.upstream_model)
    .bind(i64::from(log.streamed))
    .bind(settlement.outcome)
    .bind(log.status.map(i64::from))
    .bind(tokens(log.input_tokens))
    .bind(tokens(log.output_tokens))
    .bind(tokens(log.cached_tokens))
    .bind(tokens(log.reasoning_tokens))
    .bind(log.usage_source)
    .bind(settlement.cost.0)
    .bind(log.reserved.0)
    .bind(log.snapshot_id)
    .bind(settlement.reservation_id)
    .bind(&log.attempts)
    .bind(i64::from(log.attempt_count))
    .bind(log.started_at_ms)
    .bind(log.duration_ms)
    .bind(settlement.settled_at_ms)
    .bind(settlement.source)
    .bind(log.kind.as_str())
    .bind(&log.parent_request_id)
    .bind(log.provenance.as_ref().map(|p| p.run_id.as_str()))
    .bind(log.provenance.as_ref().map(|p| p.trail.as_str()))
    .bind(log.provenance.as_ref().map(|p| p.signature.as_str()))
    .execute(&mut **tx)
    .await?;
    Ok(())
}
