//! Budgets against a real SQLite file: UTC period boundaries, exact threshold
//! arithmetic, holds settling across a new day, a lowered limit, the per-request
//! cap, and two gateways sharing one database.

use super::period::period_bounds;
use super::*;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

#[test]
fn periods_are_utc_calendar_days_and_months() {
    assert_eq!(Period::Daily.key(at("2026-11-15T23:59:59Z")), "2026-11-15");
    assert_eq!(Period::Daily.key(at("2026-11-16T00:00:00Z")), "2026-11-16");
    // 00:30 on the 16th in Paris is still the 15th in UTC.
    assert_eq!(Period::Daily.key(at("2026-11-16T00:30:00+01:00")), "2026-11-15");
    assert_eq!(Period::Monthly.key(at("2026-12-31T23:59:59Z")), "2026-12");
    assert_eq!(Period::Monthly.key(at("2027-01-01T00:30:00+01:00")), "2026-12");
    assert_eq!(
        Period::Daily.bounds(at("2026-12-31T18:00:00Z")),
        (at("2026-12-31T00:00:00Z"), at("2027-01-01T00:00:00Z"))
    );
    assert_eq!(
        Period::Monthly.bounds(at("2028-02-29T12:00:00Z")),
        (at("2028-02-01T00:00:00Z"), at("2028-03-01T00:00:00Z"))
    );
    assert_eq!(
        period_bounds(Period::Monthly, "2026-12"),
        Some((at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00Z")))
    );
    assert_eq!(
        period_bounds(Period::Daily, "2026-02-28"),
        Some((at("2026-02-28T00:00:00Z"), at("2026-03-01T00:00:00Z")))
    );
}

#[test]
fn thresholds_are_exact_integer_arithmetic() {
    let limit = Nanos::from_usd("0.000000003").unwrap();
    // 80% of 3 nano-USD is 2.4: 2 has not reached it, 3 has.
    assert!(!crossed(Nanos(2), limit, 80));
    assert!(crossed(Nanos(3), limit, 80));
    assert_eq!(threshold(limit, 80), Nanos(3));
    let limit = Nanos::from_usd("1").unwrap();
    assert!(!crossed(Nanos(799_999_999), limit, 80));
    assert!(crossed(Nanos(800_000_000), limit, 80));
    assert_eq!(threshold(limit, 50).usd_decimal(), "0.5");
    assert!(crossed(Nanos(i64::MAX), Nanos(i64::MAX), 100), "no overflow");
}

#[test]
fn alert_thresholds_default_sort_and_refuse_nonsense() {
    assert_eq!(alert_thresholds(None).unwrap(), vec![50, 80, 100]);
    assert_eq!(alert_thresholds(Some(vec![90, 10, 90])).unwrap(), vec![10, 90]);
    assert!(alert_thresholds(Some(vec![0])).is_err());
    assert!(alert_thresholds(Some(vec![101])).is_err());
    assert!(alert_thresholds(Some((1..=11).collect())).is_err());
}

#[test]
fn slices_shrink_to_exact_claims_near_the_limit() {
    let limit = Nanos::from_usd("64").unwrap();
    let request = Nanos::from_usd("1").unwrap().0;
    assert_eq!(slice_size(limit, 0, request), 1_000_000_000, "a 64th of what is left");
    assert_eq!(slice_size(limit, 0, 1_000), 64_000, "64 requests' worth");
    assert_eq!(slice_size(limit, limit.0 - 63, request), 0);
    assert_eq!(slice_size(limit, limit.0 + 5, request), 0);
}

struct Fixed(Mutex<DateTime<Utc>>);

impl Clock for Fixed {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

async fn database(dir: &tempfile::TempDir) -> Database {
    let url = tollgate_core::db::sqlite_url(&dir.path().join("b.db"));
    Database::open(&url, Default::default()).await.unwrap()
}

fn spec(limit: &str) -> BudgetSpec {
    BudgetSpec {
        key_id: Some("key_a".into()),
        period: Period::Daily,
        limit: Nanos::from_usd(limit).unwrap(),
        max_request: None,
        alert_thresholds: vec![50, 80, 100],
    }
}

async fn claimed(database: &Database) -> i64 {
    sqlx::query_scalar("SELECT CAST(COALESCE(SUM(claimed_nano), 0) AS BIGINT) FROM budget_usage")
        .fetch_one(&database.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn holds_fit_the_limit_settle_what_was_billed_and_a_new_day_starts_again() {
    let dir = tempfile::tempdir().unwrap();
    let database = database(&dir).await;
    let clock = Arc::new(Fixed(Mutex::new(at("2026-11-15T23:59:00Z"))));
    let budgets = Budgets::new(database.clone(), clock.clone());
    budgets.set("ws", spec("1")).await.unwrap();
    assert!(
        budgets.applying("ws", "key_b").await.unwrap().is_empty(),
        "another key's"
    );
    let applying = budgets.applying("ws", "key_a").await.unwrap();
    assert_eq!(applying.len(), 1);
    let quarter = Nanos::from_usd("0.25").unwrap();
    let holds: Vec<BudgetHold> = futures_util::future::join_all((0..4).map(|_| budgets.hold(&applying, quarter)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let refused = budgets.hold(&applying, Nanos(1)).await;
    let Err(BudgetError::Exceeded(message)) = refused else {
        panic!("a fifth request past the limit fits")
    };
    assert!(
        message.contains("key key_a's daily budget") && message.contains("2026-11-15"),
        "{message}"
    );
    // Each request billed a tenth of its hold: the rest goes back.
    for hold in holds {
        hold.settle(Nanos::from_usd("0.025").unwrap());
    }
    budgets.flush().await;
    let usage = budgets.usage(&applying[0], "2026-11-15").await.unwrap();
    assert_eq!(usage.spent, Nanos::from_usd("0.1").unwrap());
    let full = budgets.hold(&applying, Nanos::from_usd("0.9").unwrap()).await.unwrap();
    assert!(budgets.hold(&applying, Nanos(1)).await.is_err(), "exactly the limit");
    full.settle(Nanos::from_usd("0.9").unwrap());
    assert!(budgets.hold(&applying, Nanos(1)).await.is_err(), "all of it billed");
    // A dropped hold (nothing billed) goes back whole.
    clock.0.lock().unwrap().clone_from(&at("2026-11-16T00:00:00Z"));
    let hold = budgets.hold(&applying, Nanos::from_usd("1").unwrap()).await.unwrap();
    drop(hold);
    assert!(budgets.hold(&applying, Nanos::from_usd("1").unwrap()).await.is_ok());
    budgets.return_slices(None).await;
    assert!(claimed(&database).await <= Nanos::from_usd("2").unwrap().0);
}

#[tokio::test]
async fn a_lowered_limit_is_not_passed_with_a_slice_claimed_under_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let database = database(&dir).await;
    let clock: Arc<dyn Clock> = Arc::new(Fixed(Mutex::new(at("2026-11-15T12:00:00Z"))));
    let budgets = Budgets::new(database.clone(), clock);
    let usd = |s: &str| Nanos::from_usd(s).unwrap();
    budgets.set("ws", spec("1")).await.unwrap();
    let applying = budgets.applying("ws", "key_a").await.unwrap();
    // Far from the limit: a slice (a 64th of 1 USD) is claimed.
    budgets
        .hold(&applying, usd("0.001"))
        .await
        .unwrap()
        .settle(usd("0.001"));
    assert_eq!(claimed(&database).await, usd("1").0 / 64);
    let lowered = budgets.set("ws", spec("0.005")).await.unwrap();
    assert_eq!(lowered.id, applying[0].id, "a replaced budget keeps its id");
    let applying = budgets.applying("ws", "key_a").await.unwrap();
    assert_eq!(applying[0].limit, usd("0.005"));
    assert!(
        budgets.hold(&applying, usd("0.004")).await.is_err(),
        "what the old slice holds unused counts until it goes back"
    );
    budgets.return_slices(None).await;
    budgets
        .hold(&applying, usd("0.004"))
        .await
        .unwrap()
        .settle(usd("0.004"));
    assert!(
        budgets.hold(&applying, Nanos(1)).await.is_err(),
        "0.001 + 0.004 is the new limit"
    );
    budgets.flush().await;
    let usage = budgets.usage(&applying[0], "2026-11-15").await.unwrap();
    assert_eq!((usage.spent, usage.held), (usd("0.005"), Nanos::ZERO));
}

#[tokio::test]
async fn max_request_refuses_a_worst_case_above_it_naming_max_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = Budgets::new(database(&dir).await, Arc::new(super::super::quota::SystemClock));
    let mut spec = spec("10");
    spec.key_id = None;
    spec.max_request = Some(Nanos::from_usd("0.01").unwrap());
    budgets.set("ws", spec).await.unwrap();
    let applying = budgets.applying("ws", "any").await.unwrap();
    assert!(budgets.hold(&applying, Nanos::from_usd("0.01").unwrap()).await.is_ok());
    let Err(BudgetError::Exceeded(message)) = budgets.hold(&applying, Nanos::from_usd("0.011").unwrap()).await else {
        panic!("above max_request")
    };
    assert!(
        message.contains("max_tokens") && message.contains("workspace's daily budget"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_with_slices_never_claim_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let database = database(&dir).await;
    let clock: Arc<dyn Clock> = Arc::new(Fixed(Mutex::new(at("2026-11-15T12:00:00Z"))));
    let (a, b) = (
        Budgets::new(database.clone(), clock.clone()),
        Budgets::new(database.clone(), clock),
    );
    a.set("ws", spec("1")).await.unwrap();
    let applying = a.applying("ws", "key_a").await.unwrap();
    let cost = Nanos::from_usd("0.003").unwrap();
    let takes = (0..800).map(|n| {
        let (gateway, applying) = (if n % 2 == 0 { a.clone() } else { b.clone() }, applying.clone());
        tokio::spawn(async move {
            match gateway.hold(&applying, cost).await {
                Ok(hold) => {
                    hold.settle(cost);
                    1
                }
                Err(_) => 0,
            }
        })
    });
    let admitted: i64 = futures_util::future::join_all(takes)
        .await
        .into_iter()
        .map(Result::unwrap)
        .sum();
    assert!(
        admitted * cost.0 <= Nanos::from_usd("1").unwrap().0,
        "{admitted} admitted"
    );
    a.return_slices(None).await;
    b.return_slices(None).await;
    // Once the slices are back, what is left is exactly the limit's remainder.
    let mut more = 0;
    while a.hold(&applying, cost).await.map(|h| h.settle(cost)).is_ok() {
        more += 1;
    }
    assert_eq!((admitted + more) * cost.0, Nanos::from_usd("0.999").unwrap().0);
    assert!(claimed(&database).await <= Nanos::from_usd("1").unwrap().0);
}

/// Renames the budget tables away, as an outage would, or back.
async fn break_budget_tables(database: &Database, broken: bool) {
    for table in ["budgets", "budget_usage"] {
        let (from, to) = match broken {
            true => (table.to_string(), format!("{table}_away")),
            false => (format!("{table}_away"), table.to_string()),
        };
        sqlx::query(sqlx::AssertSqlSafe(format!("ALTER TABLE {from} RENAME TO {to}")))
            .execute(&database.pool)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn through_an_outage_a_claimed_slice_is_spent_and_nothing_past_it_is_admitted() {
    let dir = tempfile::tempdir().unwrap();
    let database = database(&dir).await;
    let clock: Arc<dyn Clock> = Arc::new(Fixed(Mutex::new(at("2026-11-15T12:00:00Z"))));
    let budgets = Budgets::new(database.clone(), clock);
    let request = Nanos::from_usd("0.001").unwrap();
    budgets.set("ws", spec("64")).await.unwrap();
    let applying = budgets.applying("ws", "key_a").await.unwrap();
    // Far from the limit the first hold claims 64 requests' worth.
    budgets.hold(&applying, request).await.unwrap().settle(Nanos::ZERO);
    assert_eq!(claimed(&database).await, 64 * request.0);

    break_budget_tables(&database, true).await;
    tokio::time::sleep(BUDGETS_TTL).await;
    let last_known = budgets.applying("ws", "key_a").await.unwrap();
    assert_eq!(last_known, applying, "the budgets last read stand");
    let mut holds = Vec::new();
    for _ in 0..64 {
        holds.push(
            budgets
                .hold(&last_known, request)
                .await
                .expect("from the claimed slice"),
        );
    }
    assert!(
        matches!(budgets.hold(&last_known, request).await, Err(BudgetError::Database(_))),
        "past the slice a claim is needed, and it cannot be made"
    );
    // What goes back to the slice is spent again; an idle slice that cannot
    // be handed back to the database stays here rather than being lost.
    for hold in holds.drain(..10) {
        hold.settle(Nanos::ZERO);
    }
    budgets.return_slices(None).await;
    for _ in 0..10 {
        holds.push(
            budgets
                .hold(&last_known, request)
                .await
                .expect("kept through the outage"),
        );
    }
    assert!(budgets.hold(&last_known, request).await.is_err());
    let unseen = budgets.applying("ws_other", "key_x").await;
    assert!(unseen.is_err(), "nothing known of it: no budgets to assume");

    // Back: claims are made again.
    break_budget_tables(&database, false).await;
    tokio::time::sleep(tollgate_core::outage::RETRY_AFTER).await;
    holds.push(budgets.hold(&last_known, request).await.expect("the database is back"));
    assert_eq!(claimed(&database).await, 2 * 64 * request.0);
}
