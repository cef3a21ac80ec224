//! Grants and leases against real databases (SQLite in a temp dir, and the
//! machine's Postgres when it answers): a rich wallet is leased and reserved in
//! memory, a nearly empty one request by request, two gateways sharing one
//! Postgres wallet never overspend with leases on, and grants go back at
//! shutdown.

use std::time::Duration;

use tollgate_core::db::{Database, SqliteSync};
use tollgate_core::money::Nanos;
use tollgate_ledger::{Ledger, LedgerConfig, RequestKind, RequestLogRow, ReserveError};

const WORKSPACE: &str = "ws_test";

/// A database with one funded wallet, and the guard that keeps it alive.
struct Books {
    database: Database,
    /// Each gateway's journal directory lives here.
    journals: tempfile::TempDir,
    _guard: Guard,
}

enum Guard {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Schema { admin_url: String, name: String },
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Guard::Schema { admin_url, name } = self {
            let _ = std::process::Command::new("psql")
                .args([
                    admin_url.as_str(),
                    "-q",
                    "-c",
                    &format!("DROP SCHEMA IF EXISTS {name} CASCADE"),
                ])
                .output();
        }
    }
}

async fn sqlite(credit: &str) -> Books {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
    let database = Database::open(&url, SqliteSync::Normal).await.unwrap();
    fund(&database, credit).await;
    Books {
        database,
        journals: tempfile::tempdir().unwrap(),
        _guard: Guard::Dir(dir),
    }
}

/// `None` (skipping, with a message) when no Postgres answers outside CI.
async fn postgres(credit: &str) -> Option<Books> {
    sqlx::any::install_default_drivers();
    let admin_url =
        std::env::var("TG_TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let pool = match sqlx::AnyPool::connect(&admin_url).await {
        Ok(pool) => pool,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: no Postgres at {admin_url} ({e}); CI runs this test against a real server");
            return None;
        }
        Err(e) => panic!("Postgres at {admin_url} is required in CI: {e}"),
    };
    let name = format!("tg_ledger_{}", uuid::Uuid::now_v7().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let url = format!("{admin_url}?options=-c%20search_path%3D{name}");
    let database = Database::open(&url, SqliteSync::Normal).await.unwrap();
    fund(&database, credit).await;
    Some(Books {
        database,
        journals: tempfile::tempdir().unwrap(),
        _guard: Guard::Schema { admin_url, name },
    })
}

async fn fund(database: &Database, credit: &str) {
    sqlx::query("INSERT INTO accounts (id, name, created_at) VALUES ('acct_test', 'test', 0)")
        .execute(&database.pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO workspaces (id, account_id, name, created_at) VALUES ($1, 'acct_test', 'test', 0)")
        .bind(WORKSPACE)
        .execute(&database.pool)
        .await
        .unwrap();
    let mut tx = database.begin_write().await.unwrap();
    tollgate_ledger::open_wallet(&mut tx, WORKSPACE, Nanos::from_usd(credit).unwrap())
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

async fn gateway(books: &Books) -> Ledger {
    gateway_with(books, &LedgerConfig::default()).await
}

/// A gateway's ledger with a journal of its own.
async fn gateway_with(books: &Books, config: &LedgerConfig) -> Ledger {
    let journal = books.journals.path().join(uuid::Uuid::now_v7().simple().to_string());
    Ledger::start(books.database.clone(), config, &journal, "test".into(), None)
        .await
        .unwrap()
}

fn row(request: usize) -> RequestLogRow {
    RequestLogRow::unbilled(
        RequestKind::Chat,
        format!("req_{request:08}"),
        "key_test".into(),
        WORKSPACE.into(),
        "mock/small".into(),
    )
}

/// (granted, held) of every gateway's row for the wallet, summed.
async fn grants(database: &Database) -> (i64, i64) {
    sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(granted_nano), 0) AS BIGINT), CAST(COALESCE(SUM(held_nano), 0) AS BIGINT) \
         FROM wallet_holds WHERE workspace_id = $1",
    )
    .bind(WORKSPACE)
    .fetch_one(&database.pool)
    .await
    .unwrap()
}

async fn balance(database: &Database) -> (i64, i64) {
    sqlx::query_as("SELECT balance_nano, reserved_nano FROM wallets WHERE workspace_id = $1")
        .bind(WORKSPACE)
        .fetch_one(&database.pool)
        .await
        .unwrap()
}

async fn rich_wallet_is_leased_and_reserved_in_memory(books: Books) {
    let ledger = gateway(&books).await;
    let amount = Nanos::from_usd("0.001").unwrap();
    let first = ledger.reserve(WORKSPACE, amount, 1).await.unwrap();
    // A quarter of the 10 USD free.
    assert_eq!(grants(&books.database).await.0, 2_500_000_000);
    let mut holds = vec![first];
    for _ in 0..99 {
        holds.push(ledger.reserve(WORKSPACE, amount, 1).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (granted, held) = grants(&books.database).await;
    assert_eq!(granted, 2_500_000_000, "99 more holds needed no new grant");
    assert_eq!(held, 100 * amount.0, "the holds show in the row");
    for (i, hold) in holds.into_iter().enumerate() {
        ledger.settle(Some(hold), Nanos(400_000), row(i)).await.unwrap();
    }
    assert!(ledger.caught_up().await);
    let (balance, reserved) = balance(&books.database).await;
    assert_eq!(balance, 10_000_000_000 - 100 * 400_000);
    assert_eq!(reserved, 2_500_000_000 - 100 * 400_000, "postings left the lease");
    assert_eq!(grants(&books.database).await, (reserved, 0));
    assert!(tollgate_ledger::verify(&books.database).await.unwrap().is_empty());

    ledger.release_grants().await;
    assert_eq!(balance_of(&books).await.1, 0, "the lease went back at shutdown");
    assert_eq!(grants(&books.database).await, (0, 0));
    assert!(tollgate_ledger::verify(&books.database).await.unwrap().is_empty());
}

async fn balance_of(books: &Books) -> (i64, i64) {
    balance(&books.database).await
}

async fn nearly_empty_wallet_is_reserved_exactly(books: Books) {
    let ledger = gateway(&books).await;
    let amount = Nanos::from_usd("0.0001").unwrap();
    let hold = ledger.reserve(WORKSPACE, amount, 1).await.unwrap();
    assert_eq!(
        grants(&books.database).await.0,
        amount.0,
        "exactly what the request needs"
    );
    ledger.settle(Some(hold), Nanos(40_000), row(1)).await.unwrap();
    assert!(ledger.caught_up().await);
    assert_eq!(
        grants(&books.database).await,
        (0, 0),
        "the rest went back at settlement"
    );
    assert_eq!(balance_of(&books).await, (1_000_000 - 40_000, 0));
    // More than is left: refused, saying what is available.
    match ledger.reserve(WORKSPACE, Nanos(2_000_000), 1).await {
        Err(ReserveError::Insufficient { needed, available }) => {
            assert_eq!((needed.0, available.0), (2_000_000, 960_000));
        }
        other => panic!("expected insufficient balance, got {other:?}"),
    }
    assert!(tollgate_ledger::verify(&books.database).await.unwrap().is_empty());
}

/// One request on `ledger`: hold, a short wait, settle at `cost`.
async fn request(ledger: Ledger, n: usize, hold: Nanos, cost: Nanos) -> Result<(), ReserveError> {
    let held = ledger.reserve(WORKSPACE, hold, 1).await?;
    tokio::time::sleep(Duration::from_millis(2)).await;
    ledger.settle(Some(held), cost, row(n)).await?;
    Ok(())
}

/// Two gateways on one wallet: 200 concurrent requests that together hold
/// more than it has (it starts rich, so leased), then requests one after
/// another until the wallet is nearly empty (reserved directly).
async fn two_gateways_never_overspend(books: Books) {
    let gateways = [gateway(&books).await, gateway(&books).await];
    let (initial, _) = balance_of(&books).await;
    let hold = Nanos::from_usd("0.0002").unwrap();
    let cost = Nanos::from_usd("0.00015").unwrap();
    let tasks: Vec<_> = (0..200)
        .map(|n| tokio::spawn(request(gateways[n % 2].clone(), n, hold, cost)))
        .collect();
    let (mut answered, mut refused) = (0i64, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => answered += 1,
            Err(ReserveError::Insufficient { .. }) => refused += 1,
            Err(other) => panic!("{other}"),
        }
    }
    eprintln!("200 at once: {answered} answered, {refused} refused");
    for ledger in &gateways {
        assert!(ledger.caught_up().await);
    }
    assert!(answered > 0 && refused > 0, "{answered} answered, {refused} refused");
    let (balance, _) = balance_of(&books).await;
    assert_eq!(initial - balance, answered * cost.0, "every answer billed exactly once");

    // Now one at a time, alternating gateways, until both refuse: leases
    // must not strand money a request could use.
    let mut n = 200;
    let mut refusals_in_a_row = 0;
    while refusals_in_a_row < 2 {
        match request(gateways[n % 2].clone(), n, hold, cost).await {
            Ok(()) => {
                answered += 1;
                refusals_in_a_row = 0;
            }
            Err(ReserveError::Insufficient { .. }) => refusals_in_a_row += 1,
            Err(other) => panic!("{other}"),
        }
        n += 1;
    }
    for ledger in &gateways {
        assert!(ledger.caught_up().await);
    }
    let (balance, _) = balance_of(&books).await;
    assert!(balance >= 0);
    assert_eq!(initial - balance, answered * cost.0, "every answer billed exactly once");
    // Each gateway refused with less than a request free to it: its own
    // grant plus what nobody holds.
    assert!(
        balance < 2 * hold.0,
        "{balance} nano-USD left unspendable by both gateways"
    );
    for ledger in &gateways {
        ledger.release_grants().await;
    }
    assert_eq!(grants(&books.database).await, (0, 0));
    assert!(tollgate_ledger::verify(&books.database).await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_rich_wallet_is_leased() {
    rich_wallet_is_leased_and_reserved_in_memory(sqlite("10").await).await;
}

#[tokio::test]
async fn postgres_rich_wallet_is_leased() {
    if let Some(books) = postgres("10").await {
        rich_wallet_is_leased_and_reserved_in_memory(books).await;
    }
}

#[tokio::test]
async fn sqlite_nearly_empty_wallet_is_exact() {
    nearly_empty_wallet_is_reserved_exactly(sqlite("0.001").await).await;
}

#[tokio::test]
async fn postgres_nearly_empty_wallet_is_exact() {
    if let Some(books) = postgres("0.001").await {
        nearly_empty_wallet_is_reserved_exactly(books).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_two_gateways_never_overspend() {
    two_gateways_never_overspend(sqlite("0.02").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_gateways_never_overspend_with_leases() {
    if let Some(books) = postgres("0.02").await {
        two_gateways_never_overspend(books).await;
    }
}

/// A grant with nothing in flight goes back to the wallet after
/// `lease_idle_ms`, without a shutdown.
#[tokio::test]
async fn an_idle_lease_goes_back_to_the_wallet() {
    let books = sqlite("10").await;
    let config = LedgerConfig {
        lease_idle_ms: 100,
        ..LedgerConfig::default()
    };
    let ledger = gateway_with(&books, &config).await;
    let hold = ledger.reserve(WORKSPACE, Nanos(1_000_000), 1).await.unwrap();
    ledger.settle(Some(hold), Nanos(400_000), row(1)).await.unwrap();
    assert!(ledger.caught_up().await);
    assert_eq!(grants(&books.database).await, (2_500_000_000 - 400_000, 0), "leased");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(grants(&books.database).await, (0, 0), "the idle lease went back");
    assert_eq!(balance_of(&books).await, (10_000_000_000 - 400_000, 0));
    assert!(tollgate_ledger::verify(&books.database).await.unwrap().is_empty());
}
