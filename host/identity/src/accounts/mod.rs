//! Accounts: the owner of the `accounts`, `users`, `workspaces`,
//! `memberships` and `api_keys` tables (auth's `KeyResolver` reads the last
//! two). Nothing else writes or reads them; the control plane and the CLI call
//! the API here. Creating an account makes its user, the user's first
//! workspace (owner role), the workspace's wallet (through the ledger) with an
//! opening credit, and the first API key, all in one transaction.
//! `workspaces.rs`, `members.rs`, `keys.rs` and `tool_policies.rs` (the
//! `role_tool_policies` table) hold the rest of the API; every
//! change that alters what a key may do commits through
//! `KeyResolver::commit_change`, so every gateway sees it (see `auth`).

mod keys;
mod members;
mod tool_policies;
mod workspaces;

pub use keys::{KeyInfo, MintedKey};
pub use members::Member;
pub use workspaces::{Workspace, lock_workspace, set_plan_in};

use serde::Serialize;

use crate::auth;
use crate::auth::KeyResolver;
use crate::auth::permissions::Role;
use tollgate_core::db::{Database, new_id, now_unix};
use tollgate_core::money::Nanos;

type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// Why an accounts operation refused; callers decide on the variant.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("a user with e-mail '{0}' already exists")]
    EmailTaken(String),
    #[error("'{0}' is already a member")]
    AlreadyMember(String),
    #[error("the workspace has {count} members, all the seats its plan allows ({limit})")]
    SeatLimit { count: i64, limit: u32 },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// The accounts API: the database and the key resolver whose caches its
/// changes to keys, members and workspaces must reach.
#[derive(Clone)]
pub struct Accounts {
    database: Database,
    keys: KeyResolver,
}

impl Accounts {
    pub fn new(database: Database, keys: KeyResolver) -> Self {
        Self { database, keys }
    }

    pub async fn signup(&self, name: &str, email: Option<&str>, credit: Nanos) -> Result<CreatedAccount, AccountError> {
        signup(&self.database, name, email, credit).await
    }
}

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
) -> Result<CreatedAccount, AccountError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(anyhow::anyhow!("account name must be 1 to 200 characters").into());
    }
    if credit.0 < 0 {
        return Err(anyhow::anyhow!("credit must not be negative").into());
    }
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
    if taken.is_some() {
        return Err(AccountError::EmailTaken(email));
    }
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
    let workspace_id = create_workspace(&mut tx, &account_id, &user_id, "default", credit).await?;
    let (key_id, key) = insert_key(
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
        api_key: key.secret,
        credit_usd: credit.usd_string(),
        plan: "free".into(),
    })
}

/// Whether any account exists yet (a first start prints how to make one).
pub async fn any_account(database: &Database) -> sqlx::Result<bool> {
    let found: Option<String> = sqlx::query_scalar("SELECT id FROM accounts LIMIT 1")
        .fetch_optional(&database.pool)
        .await?;
    Ok(found.is_some())
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

/// A workspace on the Free plan whose wallet opens with `credit`; `user_id`
/// becomes its owner.
async fn create_workspace(
    tx: &mut Tx,
    account_id: &str,
    user_id: &str,
    name: &str,
    credit: Nanos,
) -> sqlx::Result<String> {
    let workspace_id = new_id("ws");
    let now = now_unix();
    sqlx::query("INSERT INTO workspaces (id, account_id, name, created_at, plan) VALUES ($1, $2, $3, $4, 'free')")
        .bind(&workspace_id)
        .bind(account_id)
        .bind(name)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    tollgate_ledger::open_wallet(tx, &workspace_id, credit).await?;
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
    /// The installs and tools it may reach over MCP (normalized);
    /// `None`: what its role may.
    pub tools: Option<Vec<String>>,
}

/// Mints a key; returns its id and the secret, which exists nowhere else.
async fn insert_key(
    tx: &mut Tx,
    workspace_id: &str,
    user_id: Option<&str>,
    name: &str,
    options: &KeyOptions,
) -> sqlx::Result<(String, auth::NewKey)> {
    let key_id = new_id("key");
    let key = auth::generate_key();
    sqlx::query(
        "INSERT INTO api_keys (id, workspace_id, key_hash, hint, created_at, user_id, name, scope, requests_per_minute, tools) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
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
    .bind(auth::tool_policy::to_column(options.tools.as_deref()))
    .execute(&mut **tx)
    .await?;
    Ok((key_id, key))
}
