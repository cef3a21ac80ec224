//! Account creation: an account, its user, the user's first workspace (owner
//! role), the workspace's wallet with an opening credit, and the first API key,
//! all in one transaction. Used by `tollgate admin create-account` and by the
//! control plane's `accounts.signup`; the control plane reuses the workspace and
//! key primitives below.

use serde::Serialize;

use crate::auth;
use crate::auth::permissions::Role;
use tollgate_core::db::{Database, new_id, now_unix};
use tollgate_core::money::Nanos;

type Tx = sqlx::Transaction<'static, sqlx::Any>;

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CreatedAccount {
    pub account_id: String,
    pub user_id: String,
    pub workspace_id: String,
    pub key_id: String,
    /// The API key secret. Shown once; only its hash is stored.
    pub api_key: String,
    /// Opening wallet balance, exact USD.
    pub credit_usd: String,
    pub plan: String,
}

/// Creates the account. `email` identifies the user for `members.add`; without
/// one a unique placeholder is used.
pub async fn signup(
    database: &Database,
    name: &str,
    email: Option<&str>,
    credit: Nanos,
) -> anyhow::Result<CreatedAccount> {
    let name = name.trim();
    anyhow::ensure!(
        !name.is_empty() && name.len() <= 200,
        "account name must be 1 to 200 characters"
    );
    anyhow::ensure!(credit.0 >= 0, "credit must not be negative");
    let now = now_unix();
    let account_id = new_id("acct");
    let user_id = new_id("user");
    let email = match email {
        Some(email) => normalize_email(email)?,
        None => format!("{user_id}@users.invalid"),
    };

    let mut tx = database.begin_write().await?;
    let taken: Option<String> = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_optional(&mut *tx)
        .await?;
    anyhow::ensure!(
        taken.is_none(),
        "EMAIL_TAKEN: a user with e-mail '{email}' already exists"
    );
    sqlx::query("INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3)")
        .bind(&account_id)
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query("INSERT INTO users (id, name, email, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&user_id)
        .bind(name)
        .bind(&email)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let workspace_id = create_workspace(&mut tx, &account_id, &user_id, "default").await?;
    if credit.0 > 0 {
        sqlx::query("UPDATE wallets SET balance_nano = $1 WHERE workspace_id = $2")
            .bind(credit.0)
            .bind(&workspace_id)
            .execute(&mut *tx)
            .await?;
        tollgate_ledger::journal_credit(&mut tx, &workspace_id, credit).await?;
    }
    let (key_id, api_key) = insert_key(
        &mut tx,
        &workspace_id,
        Some(&user_id),
        "default",
        &KeyOptions::default(),
    )
    .await?;
    tx.commit().await?;

    Ok(CreatedAccount {
        account_id,
        user_id,
        workspace_id,
        key_id,
        api_key,
        credit_usd: credit.usd_string(),
        plan: "free".into(),
    })
}

pub fn normalize_email(email: &str) -> anyhow::Result<String> {
    let email = email.trim().to_ascii_lowercase();
    anyhow::ensure!(
        email.len() <= 254
            && email
                .split_once('@')
                .is_some_and(|(a, b)| !a.is_empty() && b.contains('.')),
        "'{email}' is not an e-mail address"
    );
    Ok(email)
}

/// A workspace on the Free plan with an empty wallet; `user_id` becomes its owner.
pub async fn create_workspace(tx: &mut Tx, account_id: &str, user_id: &str, name: &str) -> anyhow::Result<String> {
    let workspace_id = new_id("ws");
    let now = now_unix();
    sqlx::query("INSERT INTO workspaces (id, account_id, name, created_at, plan) VALUES ($1, $2, $3, $4, 'free')")
        .bind(&workspace_id)
        .bind(account_id)
        .bind(name)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    sqlx::query("INSERT INTO wallets (workspace_id, balance_nano, reserved_nano) VALUES ($1, 0, 0)")
        .bind(&workspace_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&workspace_id)
        .bind(user_id)
        .bind(Role::Owner.as_str())
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(workspace_id)
}

/// What a new key may do beyond its user's role.
#[derive(Clone, Debug, Default)]
pub struct KeyOptions {
    pub scope: auth::KeyScope,
    /// The key's own data-plane request limit; `None`: the gateway default.
    pub requests_per_minute: Option<u32>,
}

/// Mints a key; returns its id and the secret, which exists nowhere else.
pub async fn insert_key(
    tx: &mut Tx,
    workspace_id: &str,
    user_id: Option<&str>,
    name: &str,
    options: &KeyOptions,
) -> anyhow::Result<(String, String)> {
    let key_id = new_id("key");
    let key = auth::generate_key();
    sqlx::query(
        "INSERT INTO api_keys (id, workspace_id, key_hash, hint, created_at, user_id, name, scope, requests_per_minute) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&key_id)
    .bind(workspace_id)
    .bind(key.hash.to_vec())
    .bind(&key.hint)
    .bind(now_unix())
    .bind(user_id)
    .bind(name)
    .bind(options.scope.as_str())
    .bind(options.requests_per_minute.map(i64::from))
    .execute(&mut **tx)
    .await?;
    Ok((key_id, key.secret))
}
