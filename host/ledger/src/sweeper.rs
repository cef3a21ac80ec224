//! Hands back the grants of gateways that died: a gateway refreshes its
//! `wallet_holds` rows while it lives, so a row past its expiry belongs to a
//! gateway that stopped. Each expiry is its own small transaction, conditional
//! on the row still being expired, and is recorded as a release.

use std::time::{Duration, Instant};

use super::writer::ledger_entry;
use tollgate_core::db::{Database, new_id, now_ms};
use tollgate_core::money::Nanos;

/// Sweeps every `every`. After the database was unreachable, the sweeper
/// waits one `row_ttl` before expiring anything: gateways that lived through
/// the outage could not refresh their rows meanwhile, and get that long to.
pub async fn run(database: Database, own_holder: String, every: Duration, row_ttl: Duration) {
    let mut unreachable_at: Option<Instant> = None;
    loop {
        let recovering = unreachable_at.is_some_and(|at| at.elapsed() < row_ttl);
        let swept = match recovering {
            true => sqlx::query("SELECT 1").execute(&database.pool).await.map(|_| 0),
            false => expire(&database, Some(&own_holder)).await,
        };
        match swept {
            Ok(0) => {}
            Ok(expired) => tracing::info!(expired, "released the wallet grants of stopped gateways"),
            Err(error) => {
                unreachable_at = Some(Instant::now());
                tracing::warn!(%error, "wallet grant sweep failed");
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Expires every grant row past its deadline; returns how many.
pub async fn sweep(database: &Database) -> sqlx::Result<usize> {
    expire(database, None).await
}

async fn expire(database: &Database, own_holder: Option<&str>) -> sqlx::Result<usize> {
    let now = now_ms();
    let due: Vec<(String, String)> = sqlx::query_as(
        "SELECT holder, workspace_id FROM wallet_holds WHERE expires_at < $1 AND holder <> $2 LIMIT 1000",
    )
    .bind(now)
    .bind(own_holder.unwrap_or_default())
    .fetch_all(&database.pool)
    .await?;
    let mut expired = 0;
    for (holder, workspace_id) in due {
        let _turn = database.write_turn().await;
        let mut tx = database.begin_write().await?;
        let granted: Option<i64> = sqlx::query_scalar(
            "DELETE FROM wallet_holds WHERE holder = $1 AND workspace_id = $2 AND expires_at < $3 RETURNING granted_nano",
        )
        .bind(&holder)
        .bind(&workspace_id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(granted) = granted {
            sqlx::query("UPDATE wallets SET reserved_nano = reserved_nano - $1 WHERE workspace_id = $2")
                .bind(granted)
                .bind(&workspace_id)
                .execute(&mut *tx)
                .await?;
            if granted > 0 {
                ledger_entry(&mut tx, &new_id("exp"), &workspace_id, "release", Nanos(granted), now).await?;
            }
            expired += 1;
        }
        tx.commit().await?;
    }
    Ok(expired)
}
