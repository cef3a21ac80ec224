//! Releases holds whose deadline passed: a gateway that died mid-request, or a
//! stream that outlived its reservation. Each expiry is its own small
//! transaction and is conditional on the hold still being pending, so a settle
//! racing the sweeper wins or loses cleanly.

use std::time::Duration;

use super::writer::journal;
use tollgate_core::db::{Database, now_ms};
use tollgate_core::money::Nanos;

pub async fn run(database: Database, every: Duration) {
    loop {
        match sweep(&database).await {
            Ok(0) => {}
            Ok(expired) => tracing::info!(expired, "released expired reservations"),
            Err(error) => tracing::warn!(%error, "reservation sweep failed"),
        }
        tokio::time::sleep(every).await;
    }
}

/// Expires every pending hold past its deadline; returns how many.
pub async fn sweep(database: &Database) -> sqlx::Result<usize> {
    let now = now_ms();
    let due: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT id, workspace_id, amount_nano FROM reservations WHERE state = 'pending' AND expires_at < $1 LIMIT 1000",
    )
    .bind(now)
    .fetch_all(&database.pool)
    .await?;
    let mut expired = 0;
    for (id, workspace_id, amount) in due {
        let _turn = database.write_turn().await;
        let mut tx = database.begin_write().await?;
        let updated = sqlx::query(
            "UPDATE reservations SET state = 'expired', settled_at = $1 WHERE id = $2 AND state = 'pending'",
        )
        .bind(now)
        .bind(&id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if updated == 1 {
            sqlx::query("UPDATE wallets SET reserved_nano = reserved_nano - $1 WHERE workspace_id = $2")
                .bind(amount)
                .bind(&workspace_id)
                .execute(&mut *tx)
                .await?;
            journal(
                &mut tx,
                &format!("{id}:release"),
                &workspace_id,
                "release",
                Nanos(amount),
                Some(&id),
                now,
            )
            .await?;
            expired += 1;
        }
        tx.commit().await?;
    }
    Ok(expired)
}
