//! The database side of the wallet book: each gateway's escrow row per wallet
//! (`wallet_holds`) and its share of `wallets.reserved_nano`, which is always
//! the sum of the rows' grants. Every change here runs inside the writer's
//! transaction (or the sweeper's), so a grant, the postings out of it and the
//! row that records it commit together.

use super::ReserveError;
use super::sql::{WriteResult, WriteTx};
use tollgate_core::money::Nanos;

/// How much a gateway escrows when a wallet's grant runs short.
#[derive(Clone, Copy, Debug)]
pub struct LeasePolicy {
    /// The largest slice one gateway takes (0: never more than a request needs).
    pub max: Nanos,
}

/// Lease only while the wallet could pay this many times the shortfall, so a
/// nearly empty wallet is reserved request by request, exactly.
const LEASE_WHEN_AVAILABLE_TIMES: i64 = 64;
/// A lease takes at most this fraction (1/n) of what is available, leaving
/// the rest to other gateways.
const LEASE_SHARE: i64 = 4;

impl LeasePolicy {
    /// What to ask for to cover `shortfall` when `available` is free: a slice
    /// when the wallet is rich enough, else exactly the shortfall.
    fn grant(self, shortfall: i64, available: i64) -> i64 {
        let rich = available / LEASE_WHEN_AVAILABLE_TIMES >= shortfall;
        if self.max.0 <= shortfall || !rich {
            return shortfall;
        }
        (available / LEASE_SHARE).clamp(shortfall, self.max.0)
    }
}

/// A grant taken from the wallet, and whether it is a lease (a slice kept for
/// later requests) or only what the request needed.
pub struct Grant {
    pub amount: i64,
    pub lease: bool,
}

/// Escrows at least `shortfall` of the workspace's available balance for
/// `holder`, or says how much is available. The update is conditional, so
/// gateways racing for the same wallet can never together take more than its
/// balance.
pub async fn grow(
    tx: &mut impl WriteTx,
    holder: &str,
    workspace_id: &str,
    shortfall: i64,
    policy: LeasePolicy,
    expires_at_ms: i64,
) -> WriteResult<Result<Grant, ReserveError>> {
    let available = tx
        .fetch_i64(
            "SELECT balance_nano - reserved_nano FROM wallets WHERE workspace_id = $1",
            &[workspace_id.into()],
        )
        .await?
        .unwrap_or(0);
    let wanted = policy.grant(shortfall, available);
    // Another gateway may have taken some since the read: fall back to exactly
    // the shortfall before refusing.
    let mut granted = None;
    let tries: &[i64] = if wanted > shortfall {
        &[wanted, shortfall]
    } else {
        &[shortfall]
    };
    for &amount in tries {
        let updated = tx
            .execute(
                "UPDATE wallets SET reserved_nano = reserved_nano + $1 \
                 WHERE workspace_id = $2 AND balance_nano - reserved_nano >= $1",
                &[amount.into(), workspace_id.into()],
            )
            .await?;
        if updated == 1 {
            granted = Some(amount);
            break;
        }
    }
    let Some(amount) = granted else {
        return Ok(Err(ReserveError::Insufficient {
            needed: Nanos(shortfall),
            available: Nanos(available.max(0)),
        }));
    };
    tx.execute(
        "INSERT INTO wallet_holds (holder, workspace_id, granted_nano, held_nano, expires_at) VALUES ($1, $2, $3, 0, $4) \
         ON CONFLICT (holder, workspace_id) DO UPDATE SET granted_nano = wallet_holds.granted_nano + $3, expires_at = $4",
        &[holder.into(), workspace_id.into(), amount.into(), expires_at_ms.into()],
    )
    .await?;
    Ok(Ok(Grant {
        amount,
        lease: amount > shortfall,
    }))
}

/// What one commit changes in a wallet's row.
pub struct RowWrite<'a> {
    pub holder: &'a str,
    pub workspace_id: &'a str,
    /// Settled postings: they leave both the balance and the grant.
    pub posted: i64,
    /// Slack handed back to the wallet: it leaves the grant only.
    pub trimmed: i64,
    /// Holds of requests in flight now.
    pub held: i64,
    pub expires_at_ms: i64,
}

/// What a row write found.
pub struct Written {
    /// False when the row is gone (a sweeper expired it while this gateway
    /// stalled).
    pub row_found: bool,
    /// The wallet's balance that no gateway has escrowed, when it was read.
    pub free: Option<i64>,
}

/// Applies postings and trims to the wallet and writes the row.
pub async fn write_row(tx: &mut impl WriteTx, row: &RowWrite<'_>) -> WriteResult<Written> {
    let leaving = row.posted + row.trimmed;
    let updated = tx
        .execute(
            "UPDATE wallet_holds SET granted_nano = granted_nano - $1, held_nano = $2, expires_at = $3 \
             WHERE holder = $4 AND workspace_id = $5",
            &[
                leaving.into(),
                row.held.into(),
                row.expires_at_ms.into(),
                row.holder.into(),
                row.workspace_id.into(),
            ],
        )
        .await?;
    let row_found = updated == 1;
    let free = leave_wallet(tx, row.workspace_id, row.posted, leaving, row_found).await?;
    Ok(Written { row_found, free })
}

/// Posts `posted` out of the grant of an earlier run of a gateway (a journal
/// replayed after a restart). Returns whether that run's row was still there.
pub async fn post_from(tx: &mut impl WriteTx, holder: &str, workspace_id: &str, posted: i64) -> WriteResult<bool> {
    let updated = tx
        .execute(
            "UPDATE wallet_holds SET granted_nano = granted_nano - $1 WHERE holder = $2 AND workspace_id = $3",
            &[posted.into(), holder.into(), workspace_id.into()],
        )
        .await?;
    leave_wallet(tx, workspace_id, posted, posted, updated == 1).await?;
    Ok(updated == 1)
}

/// Takes `posted` off the balance and, when the grant's row was still there,
/// `leaving` off what the wallet reserves. A row that is gone was handed back
/// whole by the sweeper, postings included, so nothing of it is reserved any
/// more. Returns the balance no gateway has escrowed, when it changed.
async fn leave_wallet(
    tx: &mut impl WriteTx,
    workspace_id: &str,
    posted: i64,
    leaving: i64,
    row_found: bool,
) -> WriteResult<Option<i64>> {
    let released = if row_found { leaving } else { 0 };
    if posted == 0 && released == 0 {
        return Ok(None);
    }
    tx.fetch_i64(
        "UPDATE wallets SET balance_nano = balance_nano - $1, reserved_nano = reserved_nano - $2 \
         WHERE workspace_id = $3 RETURNING balance_nano - reserved_nano",
        &[posted.into(), released.into(), workspace_id.into()],
    )
    .await
}

/// Hands a wallet's whole grant back and deletes the row. Returns the amount
/// returned (what the row held, which the book may have undercounted).
pub async fn give_back(tx: &mut impl WriteTx, holder: &str, workspace_id: &str) -> WriteResult<i64> {
    let row = [holder.into(), workspace_id.into()];
    let granted = tx
        .fetch_i64(
            "SELECT granted_nano FROM wallet_holds WHERE holder = $1 AND workspace_id = $2",
            &row,
        )
        .await?;
    let Some(granted) = granted else { return Ok(0) };
    tx.execute("DELETE FROM wallet_holds WHERE holder = $1 AND workspace_id = $2", &row)
        .await?;
    if granted > 0 {
        tx.execute(
            "UPDATE wallets SET reserved_nano = reserved_nano - $1 WHERE workspace_id = $2",
            &[granted.into(), workspace_id.into()],
        )
        .await?;
    }
    Ok(granted)
}
