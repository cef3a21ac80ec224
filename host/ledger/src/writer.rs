//! The ledger writer: one task that drains queued settlements, grant requests
//! and row refreshes and commits them together. Replies go out only after the
//! commit, so nothing is acknowledged before it is durable. If a batch fails,
//! its commands are retried one by one, so one bad command cannot fail its
//! neighbours.
//!
//! The writer is the only one that changes a wallet's grant in the book:
//! growing it after the database granted more, shrinking it (trims, idle
//! returns) before the database hands it back. So the book never lends money
//! the database has not set aside for this gateway.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Any, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::batch_insert::BatchInsert;
use super::book::Book;
use super::holds::{self, LeasePolicy, RowWrite};
use super::log_row::{RequestLogRow, Settlement, write_logs};
use super::sql::{SqliteWriter, Value, WriteError, WriteResult, WriteTx};
use super::{Hold, ReserveError, Settled};
use crate::SettleNotifier;
use tollgate_core::db::{Backend, Database, now_ms};
use tollgate_core::money::Nanos;

pub enum Command {
    Settle {
        hold: Option<Hold>,
        amount: Nanos,
        log: Box<RequestLogRow>,
        reply: oneshot::Sender<Result<Settled, ReserveError>>,
        /// A row that moves no money and that nobody answers on: it may
        /// wait up to [`LINGER`] to share a commit with the next command.
        linger: bool,
    },
    /// A reserve found the wallet's grant short: escrow more from the database,
    /// and hold `amount` out of it for the reserve that asked (the reply says
    /// whether it could; if not, the reserve tries again).
    Grow {
        workspace_id: String,
        amount: Nanos,
        reply: oneshot::Sender<Result<Granted, ReserveError>>,
    },
    /// A new hold changed a wallet's `held`: write it with the next commit.
    Flush,
    /// Refresh the rows' expiry and hand idle grants back (all idle ones when
    /// `idle` is `None`: shutdown).
    Tick {
        idle: Option<Duration>,
        /// Rewrite every row with a grant, to push its expiry out.
        refresh: bool,
        done: Option<oneshot::Sender<()>>,
    },
}

/// How long a write that nobody waits on may wait for company: joining the
/// next request's settlement saves a commit per tool call, skill run or actor
/// run, and lets a new hold's row ride with its own settlement.
pub const LINGER: Duration = Duration::from_millis(10);

/// When the last commit carried more than one command that somebody waited
/// on (settlements, grant requests), requests are settling side by side:
/// before committing, the writer gives the runtime's other tasks this many
/// turns to queue theirs. No timer is involved, and a lone request's
/// settlement commits at once. At 64 concurrent
/// requests this cut the gateway's CPU per request by about a seventh: a
/// commit costs a fixed set of round trips to SQLite's connection thread and
/// of WAL page writes, shared by every settlement in it.
const BUSY_YIELDS: usize = 16;

fn lingers(command: &Command) -> bool {
    matches!(command, Command::Settle { linger: true, .. } | Command::Flush)
}

/// What the writer needs besides its queue.
pub struct Writer {
    pub database: Database,
    pub book: Arc<Book>,
    /// This gateway's name on its `wallet_holds` rows.
    pub holder: String,
    pub policy: LeasePolicy,
    /// How long a row outlives this gateway's last refresh.
    pub row_ttl: Duration,
    /// This gateway's CloudEvents `source`, stamped on every request log row.
    pub source: String,
    /// Wakes the metering dispatchers after settlements commit.
    pub settled: Option<SettleNotifier>,
    pub max_batch: usize,
}

enum Outcome {
    Settle(Settled),
    Grow(Result<Granted, ReserveError>),
    Done,
}

/// What a grant request came to, for the reserve waiting on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granted {
    /// The reserve's amount is held for it: concurrent reserves cannot take
    /// the new grant from under the one that asked for it.
    Held,
    /// The grant grew (or already had room), but not enough was left to hold
    /// it once the commit landed: try again.
    Retry,
}

/// What one commit did to a wallet, applied to the book once it committed.
#[derive(Default)]
struct Effect {
    /// Holds whose settlement committed.
    released: i64,
    posted: i64,
    grown: i64,
    /// What the grant requests in this batch were for.
    asked: i64,
    /// Set by a grant: whether the wallet now holds a lease.
    lease: Option<bool>,
    /// The grant requests answered `Ok`, by their index in the batch, in the
    /// order they asked: held for them in the same step that shows the new
    /// grant, so no reserve on another thread takes their room first (they
    /// would ask again, and could starve).
    asks: Vec<(usize, Nanos)>,
}

/// Where the writer's transactions run: its own connection to a SQLite
/// file, or one held from the pool (Postgres).
pub enum Store {
    Sqlite(SqliteWriter),
    Pool(Connection),
}

impl Store {
    /// The writer's own connection when the database is a SQLite file.
    pub fn open(database: &Database) -> anyhow::Result<Self> {
        Ok(match database.open_sqlite_connection()? {
            Some(connection) => Store::Sqlite(SqliteWriter::new(connection)?),
            None => Store::Pool(Connection::default()),
        })
    }
}

pub async fn run(writer: Writer, mut store: Store, mut receiver: mpsc::Receiver<Command>) {
    let mut batch = Vec::with_capacity(writer.max_batch);
    let mut waited_on = 0;
    while let Some(first) = receiver.recv().await {
        batch.push(first);
        let deadline = tokio::time::Instant::now() + LINGER;
        let mut yielded = 0;
        loop {
            while batch.len() < writer.max_batch {
                match receiver.try_recv() {
                    Ok(command) => batch.push(command),
                    Err(_) => break,
                }
            }
            if batch.len() >= writer.max_batch {
                break;
            }
            if !batch.iter().all(lingers) {
                if waited_on > 1 && yielded < BUSY_YIELDS {
                    yielded += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                break;
            }
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(command)) => batch.push(command),
                _ => break,
            }
        }
        // Only what somebody waits on counts: a lone request's settlement
        // often shares its commit with the row write its own hold asked for.
        waited_on = batch.iter().filter(|command| !lingers(command)).count();
        match writer.commit(&mut store, &batch).await {
            Ok(outcomes) => writer.reply_all(batch.drain(..), outcomes),
            Err(error) if batch.len() == 1 => writer.fail(batch.pop().expect("one command"), &error),
            Err(error) => {
                tracing::warn!(%error, size = batch.len(), "ledger batch failed; retrying its commands one by one");
                for command in batch.drain(..) {
                    match writer.commit(&mut store, std::slice::from_ref(&command)).await {
                        Ok(outcomes) => writer.reply_all(std::iter::once(command), outcomes),
                        Err(error) => writer.fail(command, &error),
                    }
                }
            }
        }
    }
}

/// The writer's own database connection, kept between commits. Taking one
/// from the pool for every commit cost a task spawn and, on its return, a
/// ping: on SQLite a round trip to the connection's thread, added to every
/// answer's wait for its settlement.
#[derive(Default)]
pub struct Connection(Option<PoolConnection<Any>>);

impl Connection {
    async fn begin<'c>(&'c mut self, database: &Database) -> sqlx::Result<Transaction<'c, Any>> {
        let connection = match &mut self.0 {
            Some(connection) => connection,
            held => held.insert(database.pool.acquire().await?),
        };
        database.begin_write_on(connection).await
    }

    /// After a failed commit: the connection may be what failed, so the
    /// next commit takes a fresh one from the pool.
    fn discard(&mut self) {
        self.0 = None;
    }
}

impl Writer {
    async fn commit(&self, store: &mut Store, commands: &[Command]) -> WriteResult<Vec<Outcome>> {
        let refresh = commands
            .iter()
            .any(|c| matches!(c, Command::Tick { refresh: true, .. }));
        let idle = commands.iter().find_map(|c| match c {
            Command::Tick { idle, .. } => Some(*idle),
            _ => None,
        });
        let dirty = self.book.take_dirty(refresh);
        let idle_since = idle.map(|idle| idle.map(|idle| Instant::now() - idle));
        let needs_transaction = !dirty.is_empty()
            || idle_since.is_some_and(|since| self.book.any_idle(since))
            || commands
                .iter()
                .any(|c| matches!(c, Command::Settle { .. } | Command::Grow { .. }));
        if !needs_transaction {
            return Ok(commands.iter().map(|_| Outcome::Done).collect());
        }
        let expires_at_ms = now_ms() + self.row_ttl.as_millis() as i64;
        let _turn = self.database.write_turn().await;
        // Grants taken out of the book, before the database hands them back.
        let mut idle_grants = Vec::new();
        let written = match store {
            Store::Sqlite(connection) => {
                let written = async {
                    let tx = connection.begin().await?;
                    self.write(tx, commands, &dirty, idle_since, expires_at_ms, &mut idle_grants)
                        .await
                }
                .await;
                if written.is_err() {
                    connection.rollback();
                }
                written
            }
            Store::Pool(connection) => {
                async {
                    let tx = connection.begin(&self.database).await?;
                    self.write(tx, commands, &dirty, idle_since, expires_at_ms, &mut idle_grants)
                        .await
                }
                .await
            }
        };
        match written {
            Ok((mut outcomes, effects)) => {
                for (workspace_id, effect) in effects {
                    let held = self.book.committed(
                        &workspace_id,
                        effect.released,
                        effect.posted,
                        effect.grown,
                        effect.lease,
                        effect.asks.iter().map(|(_, amount)| *amount),
                    );
                    for ((index, _), held) in effect.asks.into_iter().zip(held) {
                        if let (true, Outcome::Grow(Ok(granted))) = (held, &mut outcomes[index]) {
                            *granted = Granted::Held;
                        }
                    }
                }
                Ok(outcomes)
            }
            Err(error) => {
                if let Store::Pool(connection) = store {
                    connection.discard();
                }
                for workspace_id in &dirty {
                    self.book.mark_dirty(workspace_id);
                }
                for (workspace_id, granted) in idle_grants {
                    self.book.restore(&workspace_id, granted);
                }
                Err(error)
            }
        }
    }

    /// One commit in its open transaction: each command's statements, then
    /// the batched inserts, the wallets' rows and the idle grants handed back
    /// (taken out of the book into `idle_grants`).
    async fn write(
        &self,
        mut tx: impl WriteTx,
        commands: &[Command],
        dirty: &[String],
        idle_since: Option<Option<Instant>>,
        expires_at_ms: i64,
        idle_grants: &mut Vec<(String, i64)>,
    ) -> WriteResult<(Vec<Outcome>, HashMap<String, Effect>)> {
        let mut effects: HashMap<String, Effect> = HashMap::new();
        let mut outcomes = Vec::with_capacity(commands.len());
        // Written together after the loop: a statement per batch size, not per row.
        let mut posts = Vec::new();
        let mut logs = Vec::new();
        for command in commands {
            let index = outcomes.len();
            outcomes.push(match command {
                Command::Settle { hold, amount, log, .. } => {
                    let (settled, posted) = self.settle(hold.as_ref(), *amount, log, &mut posts, &mut logs);
                    if let Some(hold) = hold {
                        let effect = effects.entry(hold.workspace_id.clone()).or_default();
                        effect.released += hold.amount.0;
                        effect.posted += posted;
                    }
                    Outcome::Settle(settled)
                }
                Command::Grow {
                    workspace_id, amount, ..
                } => {
                    let effect = effects.entry(workspace_id.clone()).or_default();
                    // Grants earlier in this batch are not in the book yet,
                    // and the reserves that asked for them will take them.
                    let shortfall = self.book.shortfall(workspace_id, Nanos(effect.asked + amount.0)) - effect.grown;
                    effect.asked += amount.0;
                    if shortfall <= 0 {
                        effect.asks.push((index, *amount));
                        Outcome::Grow(Ok(Granted::Retry))
                    } else {
                        let grown = holds::grow(
                            &mut tx,
                            &self.holder,
                            workspace_id,
                            shortfall,
                            self.policy,
                            expires_at_ms,
                        )
                        .await?;
                        Outcome::Grow(match grown {
                            Ok(grant) => {
                                effect.grown += grant.amount;
                                effect.lease = Some(grant.lease);
                                effect.asks.push((index, *amount));
                                Ok(Granted::Retry)
                            }
                            Err(ReserveError::Insufficient { available, .. }) => Err(ReserveError::Insufficient {
                                needed: *amount,
                                available: Nanos(available.0 + self.book.room(workspace_id)),
                            }),
                            Err(other) => Err(other),
                        })
                    }
                }
                Command::Flush | Command::Tick { .. } => Outcome::Done,
            });
        }
        write_posts(&mut tx, self.database.backend, &posts).await?;
        write_logs(&mut tx, self.database.backend, &logs).await?;
        self.write_rows(&mut tx, dirty, &effects, expires_at_ms).await?;
        if let Some(since) = idle_since {
            *idle_grants = self.book.take_idle(since, |id| effects.contains_key(id));
        }
        for (workspace_id, _) in idle_grants.iter() {
            holds::give_back(&mut tx, &self.holder, workspace_id).await?;
        }
        tx.commit().await?;
        Ok((outcomes, effects))
    }

    /// Writes the rows of the wallets this commit touched, trimming direct
    /// grants back to what stays in flight.
    async fn write_rows(
        &self,
        tx: &mut impl WriteTx,
        dirty: &[String],
        effects: &HashMap<String, Effect>,
        expires_at_ms: i64,
    ) -> WriteResult<()> {
        let mut touched: Vec<&str> = dirty.iter().map(String::as_str).collect();
        touched.extend(
            effects
                .keys()
                .map(String::as_str)
                .filter(|id| !dirty.iter().any(|d| d == id)),
        );
        for workspace_id in touched {
            let effect = effects.get(workspace_id);
            let posted = effect.map_or(0, |e| e.posted);
            let released = effect.map_or(0, |e| e.released);
            let (held, trimmed) = self.book.trim_for_commit(workspace_id, released, posted);
            let row = RowWrite {
                holder: &self.holder,
                workspace_id,
                posted,
                trimmed,
                held,
                expires_at_ms,
            };
            let written = holds::write_row(tx, &row).await?;
            if !written.row_found && (posted > 0 || held > 0) {
                tracing::error!(
                    workspace_id,
                    "this gateway's wallet grant expired while in use (the writer stalled past the row TTL)"
                );
            }
            // A lease is fair while the wallet keeps at least as much free for
            // other gateways; past that it shrinks to what is in flight, now.
            if let Some(free) = written.free
                && self.book.end_lease_unless(workspace_id, |granted| free >= granted)
            {
                let (held, trimmed) = self.book.trim_for_commit(workspace_id, released, posted);
                let row = RowWrite {
                    posted: 0,
                    trimmed,
                    held,
                    ..row
                };
                holds::write_row(tx, &row).await?;
            }
        }
        Ok(())
    }

    /// Decides what a settlement posts (a hold's amount, or nothing if it
    /// expired) and queues its journal entry and request log row. Returns the
    /// outcome and what was posted.
    fn settle<'a>(
        &'a self,
        hold: Option<&'a Hold>,
        amount: Nanos,
        log: &'a RequestLogRow,
        posts: &mut Vec<Post<'a>>,
        logs: &mut Vec<(&'a RequestLogRow, Settlement<'a>)>,
    ) -> (Settled, i64) {
        let now = now_ms();
        let (settled, posted) = match hold {
            None => (Settled::NoHold, 0),
            Some(hold) if Instant::now() > hold.deadline => (Settled::HoldGone, 0),
            Some(hold) => {
                let posted = amount.0.clamp(0, hold.amount.0);
                if posted > 0 {
                    // One posting per request, under the request's own id:
                    // the log row keeps the rest of the story.
                    posts.push(Post {
                        id: &log.request_id,
                        workspace_id: &hold.workspace_id,
                        amount: posted,
                        at_ms: now,
                    });
                }
                (Settled::Posted, posted)
            }
        };
        let outcome = match settled {
            Settled::HoldGone => format!("{} (hold expired before settlement: not billed)", log.outcome),
            _ => log.outcome.clone(),
        };
        // This row is also the request's usage event (see metering/feed.rs).
        let settlement = Settlement {
            cost: Nanos(posted),
            outcome,
            settled_at_ms: now,
            source: &self.source,
        };
        logs.push((log, settlement));
        (settled, posted)
    }

    fn reply_all(&self, commands: impl Iterator<Item = Command>, outcomes: Vec<Outcome>) {
        if let Some(settled) = &self.settled
            && outcomes.iter().any(|o| matches!(o, Outcome::Settle(_)))
        {
            settled.notify();
        }
        for (command, outcome) in commands.zip(outcomes) {
            match (command, outcome) {
                (Command::Settle { reply, .. }, Outcome::Settle(settled)) => {
                    let _ = reply.send(Ok(settled));
                }
                (
                    Command::Grow {
                        reply,
                        workspace_id,
                        amount,
                    },
                    Outcome::Grow(result),
                ) => {
                    // The reserve went away: what was held for it goes back.
                    if let Err(Ok(Granted::Held)) = reply.send(result) {
                        self.book.drop_hold(&workspace_id, amount);
                    }
                }
                (Command::Tick { done: Some(done), .. }, _) => {
                    let _ = done.send(());
                }
                (Command::Flush | Command::Tick { .. }, _) => {}
                _ => unreachable!("outcomes are produced in command order"),
            }
        }
    }

    fn fail(&self, command: Command, error: &WriteError) {
        tracing::error!(%error, "ledger write failed");
        let unavailable = || ReserveError::Unavailable(error.to_string());
        match command {
            Command::Settle { hold, reply, .. } => {
                // Nothing was posted: the grant still holds the amount, which
                // later requests may use again.
                if let Some(hold) = hold {
                    self.book.committed(&hold.workspace_id, hold.amount.0, 0, 0, None, []);
                }
                let _ = reply.send(Err(unavailable()));
            }
            Command::Grow { reply, .. } => {
                let _ = reply.send(Err(unavailable()));
            }
            Command::Tick { done, .. } => {
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            Command::Flush => {}
        }
    }
}

/// A settlement's `post` journal entry, written with the rest of its commit.
struct Post<'a> {
    id: &'a str,
    workspace_id: &'a str,
    amount: i64,
    at_ms: i64,
}

const JOURNAL_COLUMNS: &str = "id, workspace_id, kind, amount_nano, created_at";

static POST_INSERT: LazyLock<BatchInsert> =
    LazyLock::new(|| BatchInsert::new("ledger_entries", JOURNAL_COLUMNS, 5, "ON CONFLICT (id) DO NOTHING"));

async fn write_posts(tx: &mut impl WriteTx, backend: Backend, posts: &[Post<'_>]) -> WriteResult<()> {
    let mut values = Vec::new();
    for (statement, run) in POST_INSERT.runs(backend, posts) {
        values.clear();
        for post in run {
            values.extend::<[Value; 5]>([
                post.id.into(),
                post.workspace_id.into(),
                "post".into(),
                post.amount.into(),
                post.at_ms.into(),
            ]);
        }
        tx.execute(statement, &values).await?;
    }
    Ok(())
}

pub(super) async fn journal(
    tx: &mut Transaction<'_, Any>,
    id: &str,
    workspace_id: &str,
    kind: &str,
    amount: Nanos,
    now: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO ledger_entries (id, workspace_id, kind, amount_nano, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(workspace_id)
    .bind(kind)
    .bind(amount.0)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
