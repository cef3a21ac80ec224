//! Operator views and actions on the ledger: balances, credits, the request log,
//! and a full reconciliation of every wallet against the journal.

use serde::Serialize;
use serde_json::Value;

use super::record::{LoggedRequest, logged_request_columns};
use super::writer::ledger_entry;
use tollgate_core::db::{Database, new_id, now_ms};
use tollgate_core::money::Nanos;

#[derive(Debug, Serialize)]
pub struct WalletBalances {
    pub workspace_id: String,
    /// Posted balance minus what requests in flight hold: what new requests
    /// can still spend.
    pub available_usd: String,
    /// Held by requests in flight (as gateways last wrote it: a new hold
    /// shows within a few milliseconds).
    pub pending_usd: String,
    /// Credits minus posted charges.
    pub posted_usd: String,
    /// Escrowed by gateways for this wallet beyond what is in flight: spendable
    /// by this wallet's requests, not by anyone else (see docs/ledger.md).
    pub leased_usd: String,
}

pub async fn wallet(database: &Database, workspace_id: &str) -> anyhow::Result<WalletBalances> {
    // One statement, so the balances and the holds come from one snapshot
    // even while gateways commit.
    let row: Option<(i64, i64, i64)> = sqlx::query_as(
        "SELECT w.balance_nano, w.reserved_nano, \
         (SELECT CAST(COALESCE(SUM(h.held_nano), 0) AS BIGINT) FROM wallet_holds h WHERE h.workspace_id = w.workspace_id) \
         FROM wallets w WHERE w.workspace_id = $1",
    )
    .bind(workspace_id)
    .fetch_optional(&database.pool)
    .await?;
    let (balance, reserved, held) = row.ok_or_else(|| anyhow::anyhow!("no wallet for workspace '{workspace_id}'"))?;
    Ok(WalletBalances {
        workspace_id: workspace_id.to_string(),
        available_usd: Nanos(balance - held).usd_string(),
        pending_usd: Nanos(held).usd_string(),
        posted_usd: Nanos(balance).usd_string(),
        leased_usd: Nanos(reserved - held).usd_string(),
    })
}

/// Adds `amount` to the wallet, journaled. Creates the wallet if the workspace
/// has none.
pub async fn credit(database: &Database, workspace_id: &str, amount: Nanos) -> anyhow::Result<()> {
    let mut tx = database.begin_write().await?;
    credit_in(&mut tx, workspace_id, amount).await?;
    tx.commit().await?;
    Ok(())
}

/// [`credit`] inside the caller's transaction, so that whatever decided the
/// credit (a payment's webhook, say) commits or rolls back with it.
pub async fn credit_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace_id: &str,
    amount: Nanos,
) -> anyhow::Result<()> {
    anyhow::ensure!(amount.0 > 0, "a credit must be positive");
    let exists: Option<String> = sqlx::query_scalar("SELECT id FROM workspaces WHERE id = $1")
        .bind(workspace_id)
        .fetch_optional(&mut **tx)
        .await?;
    anyhow::ensure!(exists.is_some(), "no workspace '{workspace_id}'");
    sqlx::query(
        "INSERT INTO wallets (workspace_id, balance_nano, reserved_nano) VALUES ($1, $2, 0) \
         ON CONFLICT (workspace_id) DO UPDATE SET balance_nano = wallets.balance_nano + $2",
    )
    .bind(workspace_id)
    .bind(amount.0)
    .execute(&mut **tx)
    .await?;
    journal_credit(tx, workspace_id, amount).await?;
    Ok(())
}

/// Takes `amount` back out of the wallet, journaled as a `debit`, inside the
/// caller's transaction: money that left for good (a refunded payment). The
/// balance may go below zero when the money was already spent; requests are
/// then refused until it is topped up again.
pub async fn debit_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace_id: &str,
    amount: Nanos,
) -> anyhow::Result<()> {
    anyhow::ensure!(amount.0 > 0, "a debit must be positive");
    let done = sqlx::query("UPDATE wallets SET balance_nano = balance_nano - $2 WHERE workspace_id = $1")
        .bind(workspace_id)
        .bind(amount.0)
        .execute(&mut **tx)
        .await?;
    anyhow::ensure!(done.rows_affected() == 1, "no wallet for workspace '{workspace_id}'");
    ledger_entry(tx, &new_id("db"), workspace_id, "debit", amount, now_ms()).await?;
    Ok(())
}

/// Opens a new workspace's wallet inside the caller's transaction (the one that
/// creates the workspace), with `opening` credit journaled when it is positive.
pub async fn open_wallet(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace_id: &str,
    opening: Nanos,
) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO wallets (workspace_id, balance_nano, reserved_nano) VALUES ($1, $2, 0)")
        .bind(workspace_id)
        .bind(opening.0.max(0))
        .execute(&mut **tx)
        .await?;
    if opening.0 > 0 {
        journal_credit(tx, workspace_id, opening).await?;
    }
    Ok(())
}

/// The journal entry for a credit, inside the caller's transaction.
pub async fn journal_credit(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace_id: &str,
    amount: Nanos,
) -> sqlx::Result<()> {
    ledger_entry(tx, &new_id("cr"), workspace_id, "credit", amount, now_ms()).await
}

/// Recomputes every wallet from the journal and the gateways' grant rows.
/// Returns one line per discrepancy; empty means the books balance.
pub async fn verify(database: &Database) -> anyhow::Result<Vec<String>> {
    // One statement: every figure comes from the same snapshot, so a gateway
    // committing meanwhile cannot show up as drift; the journal is read in
    // one pass, grouped by wallet.
    type Row = (String, i64, i64, i64, i64, i64, i64);
    let wallets: Vec<Row> = sqlx::query_as(
        "SELECT w.workspace_id, w.balance_nano, w.reserved_nano, \
         CAST(COALESCE(j.credits, 0) AS BIGINT), CAST(COALESCE(j.posts, 0) AS BIGINT), \
         CAST(COALESCE(j.debits, 0) AS BIGINT), \
         CAST(COALESCE(h.granted, 0) AS BIGINT) \
         FROM wallets w \
         LEFT JOIN (SELECT workspace_id, \
             SUM(CASE WHEN kind = 'credit' THEN amount_nano ELSE 0 END) AS credits, \
             SUM(CASE WHEN kind = 'post' THEN amount_nano ELSE 0 END) AS posts, \
             SUM(CASE WHEN kind = 'debit' THEN amount_nano ELSE 0 END) AS debits \
             FROM ledger_entries GROUP BY workspace_id) j ON j.workspace_id = w.workspace_id \
         LEFT JOIN (SELECT workspace_id, SUM(granted_nano) AS granted FROM wallet_holds GROUP BY workspace_id) h \
             ON h.workspace_id = w.workspace_id \
         ORDER BY w.workspace_id",
    )
    .fetch_all(&database.pool)
    .await?;
    let mut drift = Vec::new();
    for (workspace_id, balance, reserved, credits, posts, debits, granted) in wallets {
        if balance != credits - posts - debits {
            drift.push(format!(
                "{workspace_id}: balance {balance} ≠ credits {credits} − posts {posts} − debits {debits}"
            ));
        }
        if reserved != granted {
            drift.push(format!(
                "{workspace_id}: reserved {reserved} ≠ grants held by gateways {granted}"
            ));
        }
        // Spending never passes what was credited; a debit (a refund of money
        // already spent) may, so it is left out of this check.
        if balance + debits - reserved < 0 {
            drift.push(format!(
                "{workspace_id}: spent past its credits: available balance without debits is {}",
                balance + debits - reserved
            ));
        }
    }
    Ok(drift)
}

/// One request log row as JSON (the full trace), or `None` when the log
/// does not hold it (it may be archived: see `retention`).
pub async fn request_log(database: &Database, request_id: &str) -> anyhow::Result<Option<Value>> {
    let row: Option<LoggedRequest> = sqlx::query_as(concat!(
        "SELECT ",
        logged_request_columns!(),
        " FROM request_log WHERE request_id = $1"
    ))
    .bind(request_id)
    .fetch_optional(&database.pool)
    .await?;
    Ok(row.map(|row| row.render()))
}

/// An actor run as its request-log row keeps it.
#[derive(Clone, Debug)]
pub struct ActorRunRow {
    pub run_id: String,
    pub request_id: String,
    pub workspace_id: String,
    /// `actor/<namespace>/<deployment>` or `actor/by-id/<id>`.
    pub model: String,
    pub actor_id: String,
    pub outcome: String,
    pub started_at_ms: i64,
    pub trail: String,
    pub signature: String,
}

/// The actor run `id` (its run id or its request id) of `workspace_id`.
pub async fn actor_run(database: &Database, workspace_id: &str, id: &str) -> sqlx::Result<Option<ActorRunRow>> {
    type Row = (
        String,
        String,
        String,
        String,
        Option<String>,
        String,
        i64,
        String,
        String,
    );
    let row: Option<Row> = sqlx::query_as(concat!(
        "SELECT run_id, request_id, workspace_id, model, upstream_model, outcome, started_at_ms, provenance, ",
        "provenance_signature FROM request_log WHERE workspace_id = $1 AND (run_id = $2 OR request_id = $2) ",
        "AND run_id IS NOT NULL"
    ))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(&database.pool)
    .await?;
    Ok(row.map(
        |(run_id, request_id, workspace_id, model, actor_id, outcome, started_at_ms, trail, signature)| ActorRunRow {
            run_id,
            request_id,
            workspace_id,
            model,
            actor_id: actor_id.unwrap_or_default(),
            outcome,
            started_at_ms,
            trail,
            signature,
        },
    ))
}

/// Which of a workspace's request-log rows to list, newest first.
#[derive(Clone, Debug, Default)]
pub struct UsageQuery {
    pub workspace_id: String,
    /// Only requests started at or after this time (Unix milliseconds).
    pub since_ms: Option<i64>,
    /// Only requests started before this time (Unix milliseconds).
    pub until_ms: Option<i64>,
    /// Only requests made with this key.
    pub key_id: Option<String>,
    /// Only request ids below this one (the last id of the previous page).
    pub before_request_id: Option<String>,
    pub limit: u32,
}

/// One request-log row as a usage listing shows it.
#[derive(Clone, Debug)]
pub struct UsageRow {
    pub request_id: String,
    pub key_id: String,
    pub model: String,
    pub provider: Option<String>,
    pub outcome: String,
    pub status: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost: Nanos,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// `chat`, `tool_call` or `skill_run`.
    pub kind: String,
    /// The request this one ran inside, for a skill's model and tool calls.
    pub parent_request_id: Option<String>,
}

/// A workspace's request log, newest first, at most `query.limit` rows. Request
/// ids are time-ordered (UUID v7), so "before this id" pages backwards in time.
pub async fn usage(database: &Database, query: &UsageQuery) -> anyhow::Result<Vec<UsageRow>> {
    type Row = (
        String,
        String,
        String,
        Option<String>,
        String,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        i64,
        i64,
        i64,
        String,
        Option<String>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT request_id, key_id, model, provider, outcome, status, input_tokens, output_tokens, cost_nano, \
         started_at_ms, duration_ms, kind, parent_request_id FROM request_log \
         WHERE workspace_id = $1 AND started_at_ms >= $2 AND started_at_ms < $3 \
         AND ($4 = '' OR key_id = $4) AND ($5 = '' OR request_id < $5) \
         ORDER BY request_id DESC LIMIT $6",
    )
    .bind(&query.workspace_id)
    .bind(query.since_ms.unwrap_or(0))
    .bind(query.until_ms.unwrap_or(i64::MAX))
    .bind(query.key_id.as_deref().unwrap_or_default())
    .bind(query.before_request_id.as_deref().unwrap_or_default())
    .bind(i64::from(query.limit))
    .fetch_all(&database.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(
                request_id,
                key_id,
                model,
                provider,
                outcome,
                status,
                input,
                output,
                cost,
                started,
                duration,
                kind,
                parent,
            )| UsageRow {
                request_id,
                key_id,
                model,
                provider,
                outcome,
                status,
                input_tokens: input,
                output_tokens: output,
                cost: Nanos(cost),
                started_at_ms: started,
                duration_ms: duration,
                kind,
                parent_request_id: parent,
            },
        )
        .collect())
}

/// A workspace's model requests over a time range and what they were billed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spend {
    /// Chat rows, less those refused before anything was reserved, and
    /// actor-run rows (a hosted actor run is admitted as a request of its own).
    pub requests: u64,
    /// Everything posted for them (provider cost plus fees).
    pub cost: Nanos,
    /// The plan's gateway fees within `cost`.
    pub fee: Nanos,
}

/// The model requests the workspace started in `[since_ms, until_ms)`.
pub async fn spend(database: &Database, workspace_id: &str, since_ms: i64, until_ms: i64) -> anyhow::Result<Spend> {
    let (requests, cost, fee): (i64, i64, i64) = sqlx::query_as(
        "SELECT CAST(COUNT(*) AS BIGINT), CAST(COALESCE(SUM(cost_nano), 0) AS BIGINT), \
         CAST(COALESCE(SUM(fee_nano), 0) AS BIGINT) FROM request_log \
         WHERE workspace_id = $1 AND kind IN ('chat', 'actor_run') AND started_at_ms >= $2 AND started_at_ms < $3 \
         AND (kind = 'actor_run' OR outcome NOT IN ('insufficient_balance', 'budget_exceeded'))",
    )
    .bind(workspace_id)
    .bind(since_ms)
    .bind(until_ms)
    .fetch_one(&database.pool)
    .await?;
    Ok(Spend {
        requests: u64::try_from(requests).unwrap_or(0),
        cost: Nanos(cost),
        fee: Nanos(fee),
    })
}

/// The read-only views of wallets and the request log, for a caller that
/// should read them and nothing else (the control plane's operations): it
/// holds the database, but offers no query of its own and no write. Each
/// read first waits (briefly) for the ledger's journal to reach the
/// database, so a caller reading right after an answer sees it.
#[derive(Clone)]
pub struct Views {
    database: Database,
    ledger: Option<crate::Ledger>,
}

impl Views {
    pub fn new(database: Database, ledger: Option<crate::Ledger>) -> Self {
        Self { database, ledger }
    }

    async fn caught_up(&self) {
        if let Some(ledger) = &self.ledger {
            ledger.caught_up().await;
        }
    }

    /// [`wallet`]: a workspace's balances.
    pub async fn wallet(&self, workspace_id: &str) -> anyhow::Result<WalletBalances> {
        self.caught_up().await;
        wallet(&self.database, workspace_id).await
    }

    /// [`usage`]: a page of a workspace's request log, newest first.
    pub async fn usage(&self, query: &UsageQuery) -> anyhow::Result<Vec<UsageRow>> {
        self.caught_up().await;
        usage(&self.database, query).await
    }

    /// [`request_log`]: one request's full trace.
    pub async fn request_log(&self, request_id: &str) -> anyhow::Result<Option<Value>> {
        self.caught_up().await;
        request_log(&self.database, request_id).await
    }
}
