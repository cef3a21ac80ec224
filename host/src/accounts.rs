//! Account creation: an account, its first workspace, the workspace's wallet with
//! an opening credit, and its first API key, all in one transaction.

use serde::Serialize;

use crate::auth;
use crate::db::{Database, new_id, now_unix};
use crate::money::Nanos;

#[derive(Debug, Serialize)]
pub struct CreatedAccount {
    pub account_id: String,
    pub workspace_id: String,
    pub key_id: String,
    /// The API key secret. Shown once; only its hash is stored.
    pub api_key: String,
    /// Opening wallet balance, exact USD.
    pub credit_usd: String,
}

pub async fn create_account(database: &Database, name: &str, credit: Nanos) -> anyhow::Result<CreatedAccount> {
    let name = name.trim();
    anyhow::ensure!(
        !name.is_empty() && name.len() <= 200,
        "account name must be 1 to 200 characters"
    );
    anyhow::ensure!(credit.0 >= 0, "credit must not be negative");
    let now = now_unix();
    let account_id = new_id("acct");
    let workspace_id = new_id("ws");
    let key_id = new_id("key");
    let key = auth::generate_key();

    let mut tx = database.begin_write().await?;
    sqlx::query("INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3)")
        .bind(&account_id)
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query("INSERT INTO workspaces (id, account_id, name, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&workspace_id)
        .bind(&account_id)
        .bind("default")
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query("INSERT INTO wallets (workspace_id, balance_nano, reserved_nano) VALUES ($1, $2, 0)")
        .bind(&workspace_id)
        .bind(credit.0)
        .execute(&mut *tx)
        .await?;
    if credit.0 > 0 {
        crate::ledger::journal_credit(&mut tx, &workspace_id, credit).await?;
    }
    sqlx::query("INSERT INTO api_keys (id, workspace_id, key_hash, hint, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(&key_id)
        .bind(&workspace_id)
        .bind(key.hash.to_vec())
        .bind(&key.hint)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;

    Ok(CreatedAccount {
        account_id,
        workspace_id,
        key_id,
        api_key: key.secret,
        credit_usd: credit.usd_string(),
    })
}
