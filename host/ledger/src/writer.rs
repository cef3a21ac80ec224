//! The ledger writer: the one task that changes the database's side of the
//! ledger. It applies the journal (settlements already answered: postings and
//! request-log rows) together with grant requests and row refreshes, one
//! transaction per batch, and records in that transaction how far the journal
//! is applied, so a record is applied exactly once even if the gateway dies
//! between the commit and forgetting the record.
//!
//! When the database is away, commits fail and are retried with backoff; the
//! journal keeps the answers meanwhile. A record that fails alone while the
//! database answers is set aside (`rejected.jsonl`), so it cannot stop the rest.
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

use super::ReserveError;
use super::batch_insert::BatchInsert;
use super::book::Book;
use super::entry::Entry;
use super::holds::{self, LeasePolicy, RowWrite};
use super::journal::{Journal, Tail};
use super::log_row::write_logs;
use super::sql::{SqliteWriter, Value, WriteError, WriteResult, WriteTx};
use crate::SettleNotifier;
use tollgate_core::db::{Backend, Database, now_ms};
use tollgate_core::money::Nanos;

pub enum Command {
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

/// How long journal records and row writes, which nobody waits on, wait for
/// company before they are applied: a commit costs a fixed set of round
/// trips and WAL page writes, shared by everything in it.
pub const LINGER: Duration = Duration::from_millis(2);

/// After a failed commit the writer waits this long, doubled per failure up
/// to [`MAX_BACKOFF`], before it tries the database again.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Whether somebody waits on the command's commit.
fn urgent(command: &Command) -> bool {
    matches!(command, Command::Grow { .. } | Command::Tick { done: Some(_), .. })
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
    /// Wakes the metering dispatchers after settlements commit.
    pub settled: Option<SettleNotifier>,
    pub max_batch: usize,
    pub journal: Arc<Journal>,
}

enum Outcome {
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
    /// This run's journaled postings that the commit applied.
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

/// A journal record read and waiting to be applied; `None` when it could
/// not be read as an entry (it was set aside, and is skipped).
type Pending = (u64, Option<Entry>);

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

/// The writer's loop: applies the journal from `tail` on, with the commands
/// that arrive meanwhile, until the command queue closes and the journal is
/// applied.
pub async fn run(writer: Writer, mut store: Store, mut receiver: mpsc::Receiver<Command>, mut tail: Tail) {
    let mut commands = Vec::with_capacity(writer.max_batch);
    let mut pending: Vec<Pending> = Vec::new();
    let mut failures = 0u32;
    let mut open = true;
    loop {
        open &= take_commands(&mut receiver, &mut commands, writer.max_batch);
        writer.read_journal(&mut tail, &mut pending);
        if commands.is_empty() && pending.is_empty() {
            if !open {
                return;
            }
            tokio::select! {
                command = receiver.recv() => match command {
                    Some(command) => commands.push(command),
                    None => open = false,
                },
                _ = writer.journal.wake.notified() => {}
            }
            continue;
        }
        if open && !commands.iter().any(urgent) && pending.len() < writer.max_batch {
            open &= linger(&mut receiver, &mut commands).await;
            writer.read_journal(&mut tail, &mut pending);
        }
        let refresh_all = failures > 0;
        match writer.commit(&mut store, &commands, &pending, refresh_all).await {
            Ok(outcomes) => {
                if failures > 0 {
                    tracing::info!(lag = pending.len(), "the database is back: applying the ledger journal");
                }
                failures = 0;
                writer.applied(&pending);
                pending.clear();
                writer.reply_all(commands.drain(..), outcomes);
            }
            Err(error) => {
                writer.journal.set_database_reachable(false);
                for command in commands.drain(..) {
                    writer.fail(command, &error);
                }
                if failures == 0 {
                    tracing::warn!(%error, "the ledger journal cannot reach the database; answers keep being journaled");
                }
                if pending.len() > 1 || pending.first().is_some_and(|(_, entry)| entry.is_some()) {
                    writer.set_aside_what_fails_alone(&mut store, &mut pending).await;
                }
                failures += 1;
                let backoff = FIRST_BACKOFF.saturating_mul(1 << failures.min(5)).min(MAX_BACKOFF);
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// Takes the commands already queued; false once the queue is closed.
fn take_commands(receiver: &mut mpsc::Receiver<Command>, commands: &mut Vec<Command>, max: usize) -> bool {
    while commands.len() < max {
        match receiver.try_recv() {
            Ok(command) => commands.push(command),
            Err(mpsc::error::TryRecvError::Empty) => return true,
            Err(mpsc::error::TryRecvError::Disconnected) => return false,
        }
    }
    true
}

/// Waits up to [`LINGER`] for company, or until a command somebody waits on
/// arrives; false once the queue is closed.
async fn linger(receiver: &mut mpsc::Receiver<Command>, commands: &mut Vec<Command>) -> bool {
    let deadline = tokio::time::Instant::now() + LINGER;
    loop {
        tokio::select! {
            command = receiver.recv() => match command {
                Some(command) => {
                    let waited_on = urgent(&command);
                    commands.push(command);
                    if waited_on {
                        return true;
                    }
                }
                None => return false,
            },
            _ = tokio::time::sleep_until(deadline) => return true,
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
    /// Reads journal records past `pending` (up to a batch); a record that is
    /// not an entry is set aside.
    fn read_journal(&self, tail: &mut Tail, pending: &mut Vec<Pending>) {
        let room = self.max_batch.saturating_sub(pending.len());
        if room == 0 {
            return;
        }
        match tail.read(self.journal.appended(), room) {
            Ok(records) => {
                for record in records {
                    let entry = match serde_json::from_slice::<Entry>(&record.payload) {
                        Ok(entry) => Some(entry),
                        Err(error) => {
                            self.set_aside(record.seq, &record.payload, &error.to_string());
                            None
                        }
                    };
                    pending.push((record.seq, entry));
                }
            }
            Err(error) => tracing::error!(%error, "reading the ledger journal failed"),
        }
    }

    /// After a commit that applied `pending`: the journal forgets it, the
    /// book stops counting its postings as in transit, and metering is woken.
    fn applied(&self, pending: &[Pending]) {
        self.journal.set_database_reachable(true);
        let Some(&(last, _)) = pending.last() else { return };
        self.journal.mark_applied(last);
        if let Some(settled) = &self.settled {
            settled.notify();
        }
    }

    /// After a failed commit of journal records: when the database answers,
    /// one record may be what fails (a constraint it breaks); each is tried
    /// alone, and one that fails alone is set aside, so that it cannot stop
    /// the journal. When the database does not answer, nothing is set aside.
    async fn set_aside_what_fails_alone(&self, store: &mut Store, pending: &mut Vec<Pending>) {
        if sqlx::query("SELECT 1").execute(&self.database.pool).await.is_err() {
            return;
        }
        let mut index = 0;
        while index < pending.len() {
            let one = std::slice::from_ref(&pending[index]);
            match self.commit(store, &[], one, false).await {
                Ok(_) => {
                    self.applied(one);
                    pending.remove(index);
                }
                Err(error) => {
                    if sqlx::query("SELECT 1").execute(&self.database.pool).await.is_err() {
                        return;
                    }
                    let (seq, entry) = &mut pending[index];
                    let payload = serde_json::to_vec(entry).unwrap_or_default();
                    self.set_aside(*seq, &payload, &error.to_string());
                    *entry = None;
                    index += 1;
                }
            }
        }
    }

    /// Keeps a record the database refused beside the journal, for an
    /// operator to look at, and says so loudly.
    fn set_aside(&self, seq: u64, payload: &[u8], why: &str) {
        let path = self.journal.dir().join("rejected.jsonl");
        let line = serde_json::json!({
            "seq": seq,
            "error": why,
            "entry": String::from_utf8_lossy(payload),
        });
        let kept = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes()));
        tracing::error!(
            seq,
            error = why,
            kept = kept.is_ok(),
            file = %path.display(),
            "a ledger journal record could not be applied and was set aside"
        );
    }

    async fn commit(
        &self,
        store: &mut Store,
        commands: &[Command],
        entries: &[Pending],
        refresh_all: bool,
    ) -> WriteResult<Vec<Outcome>> {
        let refresh = refresh_all
            || commands
                .iter()
                .any(|c| matches!(c, Command::Tick { refresh: true, .. }));
        let idle = commands.iter().find_map(|c| match c {
            Command::Tick { idle, .. } => Some(*idle),
            _ => None,
        });
        let dirty = self.book.take_dirty(refresh);
        let idle_since = idle.map(|idle| idle.map(|idle| Instant::now() - idle));
        let needs_transaction = !dirty.is_empty()
            || !entries.is_empty()
            || idle_since.is_some_and(|since| self.book.any_idle(since))
            || commands.iter().any(|c| matches!(c, Command::Grow { .. }));
        if !needs_transaction {
            return Ok(commands.iter().map(|_| Outcome::Done).collect());
        }
        let expires_at_ms = now_ms() + self.row_ttl.as_millis() as i64;
        let _turn = self.database.write_turn().await;
        // Grants taken out of the book, before the database hands them back.
        let mut idle_grants = Vec::new();
        let batch = Batch {
            commands,
            entries,
            dirty: &dirty,
            idle_since,
            expires_at_ms,
        };
        let written = match store {
            Store::Sqlite(connection) => {
                let written = async {
                    let tx = connection.begin().await?;
                    self.write(tx, &batch, &mut idle_grants).await
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
                    self.write(tx, &batch, &mut idle_grants).await
                }
                .await
            }
        };
        match written {
            Ok((mut outcomes, effects)) => {
                for (workspace_id, effect) in effects {
                    let held = self.book.committed(
                        &workspace_id,
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

    /// One commit in its open transaction: the journal entries' postings and
    /// request-log rows, each command's statements, the wallets' rows, the
    /// idle grants handed back (taken out of the book into `idle_grants`),
    /// and how far the journal is now applied.
    async fn write(
        &self,
        mut tx: impl WriteTx,
        batch: &Batch<'_>,
        idle_grants: &mut Vec<(String, i64)>,
    ) -> WriteResult<(Vec<Outcome>, HashMap<String, Effect>)> {
        let mut effects: HashMap<String, Effect> = HashMap::new();
        // Written together: a statement per batch size, not per row.
        let mut posts = Vec::new();
        let mut logs = Vec::new();
        // Postings out of the grants of this gateway's earlier runs.
        let mut earlier: HashMap<(&str, &str), i64> = HashMap::new();
        for entry in batch.entries.iter().filter_map(|(_, entry)| entry.as_ref()) {
            if let Some((wallet, amount)) = entry.posting() {
                posts.push(Post {
                    id: &entry.log.request_id,
                    workspace_id: wallet,
                    amount,
                    at_ms: entry.settled_at_ms,
                });
                match entry.holder == self.holder {
                    true => effects.entry(wallet.to_string()).or_default().posted += amount,
                    false => *earlier.entry((&entry.holder, wallet)).or_default() += amount,
                }
            }
            // This row is also the request's usage event (see metering/feed.rs).
            logs.push((&entry.log, entry.settlement()));
        }
        let mut outcomes = Vec::with_capacity(batch.commands.len());
        for command in batch.commands {
            let index = outcomes.len();
            outcomes.push(match command {
                Command::Grow {
                    workspace_id, amount, ..
                } => Outcome::Grow(
                    self.grow(&mut tx, &mut effects, index, workspace_id, *amount, batch)
                        .await?,
                ),
                Command::Flush | Command::Tick { .. } => Outcome::Done,
            });
        }
        write_posts(&mut tx, self.database.backend, &posts).await?;
        write_logs(&mut tx, self.database.backend, &logs).await?;
        self.write_rows(&mut tx, batch.dirty, &effects, batch.expires_at_ms)
            .await?;
        for ((holder, workspace_id), posted) in earlier {
            if !holds::post_from(&mut tx, holder, workspace_id, posted).await? {
                tracing::info!(
                    workspace_id,
                    holder,
                    "a replayed posting found its grant already handed back: it leaves the balance only"
                );
            }
        }
        if let Some(since) = batch.idle_since {
            *idle_grants = self.book.take_idle(since, |id| effects.contains_key(id));
        }
        for (workspace_id, _) in idle_grants.iter() {
            holds::give_back(&mut tx, &self.holder, workspace_id).await?;
        }
        if let Some(&(last, _)) = batch.entries.last() {
            tx.execute(
                "INSERT INTO ledger_journal_marks (journal_id, applied_seq, applied_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (journal_id) DO UPDATE SET applied_seq = $2, applied_at = $3",
                &[self.journal.id().into(), (last as i64).into(), now_ms().into()],
            )
            .await?;
        }
        tx.commit().await?;
        Ok((outcomes, effects))
    }

    /// A grant request: escrow what the book lacks for `amount`.
    async fn grow(
        &self,
        tx: &mut impl WriteTx,
        effects: &mut HashMap<String, Effect>,
        index: usize,
        workspace_id: &str,
        amount: Nanos,
        batch: &Batch<'_>,
    ) -> WriteResult<Result<Granted, ReserveError>> {
        let effect = effects.entry(workspace_id.to_string()).or_default();
        // Grants earlier in this batch are not in the book yet, and the
        // reserves that asked for them will take them.
        let shortfall = self.book.shortfall(workspace_id, Nanos(effect.asked + amount.0)) - effect.grown;
        effect.asked += amount.0;
        if shortfall <= 0 {
            effect.asks.push((index, amount));
            return Ok(Ok(Granted::Retry));
        }
        let grown = holds::grow(
            tx,
            &self.holder,
            workspace_id,
            shortfall,
            self.policy,
            batch.expires_at_ms,
        )
        .await?;
        Ok(match grown {
            Ok(grant) => {
                effect.grown += grant.amount;
                effect.lease = Some(grant.lease);
                effect.asks.push((index, amount));
                Ok(Granted::Retry)
            }
            Err(ReserveError::Insufficient { available, .. }) => Err(ReserveError::Insufficient {
                needed: amount,
                available: Nanos(available.0 + self.book.room(workspace_id)),
            }),
            Err(other) => Err(other),
        })
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
            let asked = effect.map_or(0, |e| e.asked);
            let (held, trimmed) = self.book.trim_for_commit(workspace_id, asked);
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
                let (held, trimmed) = self.book.trim_for_commit(workspace_id, asked);
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

    fn reply_all(&self, commands: impl Iterator<Item = Command>, outcomes: Vec<Outcome>) {
        for (command, outcome) in commands.zip(outcomes) {
            match (command, outcome) {
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
        match command {
            Command::Grow { reply, .. } => {
                let _ = reply.send(Err(ReserveError::Unavailable(error.to_string())));
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

/// What one commit applies.
struct Batch<'a> {
    commands: &'a [Command],
    entries: &'a [Pending],
    dirty: &'a [String],
    idle_since: Option<Option<Instant>>,
    expires_at_ms: i64,
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

pub(super) async fn ledger_entry(
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
