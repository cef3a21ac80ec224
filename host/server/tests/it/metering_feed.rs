//! The usage feed against both databases: a reader that follows the request log
//! sees every settled row exactly once while writers commit out of order, and
//! an upgrade from the old outbox table redelivers what it had not delivered.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::PgSchema;
use rand::Rng;
use sqlx::{AnyPool, Executor};
use tollgate_core::db::{Backend, Database, SqliteSync, sqlite_url};
use tollgate_metering::{FeedReader, Position};

/// A database of each kind this machine has; Postgres is skipped (outside CI)
/// when no server runs.
async fn databases() -> Vec<(Database, Option<PgSchema>, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Database::open(&sqlite_url(&dir.path().join("feed.db")), SqliteSync::Normal)
        .await
        .unwrap();
    let mut out = vec![(sqlite, None, dir)];
    if let Some(schema) = PgSchema::create().await {
        let postgres = Database::open(&schema.url, SqliteSync::Normal).await.unwrap();
        out.push((postgres, Some(schema), tempfile::tempdir().unwrap()));
    }
    out
}

async fn insert_row(executor: impl Executor<'_, Database = sqlx::Any>, request_id: &str, status: i64) {
    sqlx::query(
        "INSERT INTO request_log (request_id, key_id, workspace_id, model, streamed, outcome, status, usage_source, \
         cost_nano, reserved_nano, attempts, attempt_count, started_at_ms, duration_ms, settled_at_ms) \
         VALUES ($1, 'key_t', 'ws_t', 'mock/small', 0, 'success', $2, 'upstream', 7, 10, '[]', $3, 1, 1, 2)",
    )
    .bind(request_id)
    .bind(status)
    // A 402 is a refusal: no provider was tried.
    .bind(i64::from(status != 402))
    .execute(executor)
    .await
    .unwrap();
}

/// Reads the feed from `from` to its current end; returns the ids and the new position.
async fn drain(database: &Database, from: Position) -> (Vec<String>, Position) {
    // On a SQLite file the reader has a connection of its own; on Postgres
    // it reads through the pool.
    let reader = FeedReader::open(database).unwrap();
    let mut position = from;
    let mut ids = Vec::new();
    loop {
        let rows = reader.read(position, 64).await.unwrap();
        if rows.is_empty() {
            return (ids, position);
        }
        for row in rows {
            assert!(row.position() > position, "the feed only moves forward");
            position = row.position();
            ids.push(row.request_id);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_row_committed_late_is_not_passed_over() {
    for (database, _schema, _dir) in databases().await {
        // T1 inserts first (lower seq) but commits after T2.
        let mut first = database.pool.begin().await.unwrap();
        insert_row(&mut *first, "req_first", 200).await;
        let mut second = database.pool.begin().await.unwrap();
        if database.backend == Backend::Sqlite {
            // SQLite has one writer: T2 cannot even start until T1 ends, which
            // is why seq order is commit order there.
            first.commit().await.unwrap();
            insert_row(&mut *second, "req_second", 200).await;
            second.commit().await.unwrap();
        } else {
            insert_row(&mut *second, "req_second", 200).await;
            second.commit().await.unwrap();
            let (seen, position) = drain(&database, Position::default()).await;
            assert!(
                seen.is_empty(),
                "a reader must wait for the older open transaction, saw {seen:?}"
            );
            assert_eq!(position, Position::default());
            first.commit().await.unwrap();
        }
        // Another test's transaction on the same Postgres server can hold the
        // frontier back for a moment (the frontier is cluster-wide); the feed's
        // followers read again, and so does this check, until the deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let seen = loop {
            let (seen, _) = drain(&database, Position::default()).await;
            if seen.len() >= 2 || std::time::Instant::now() > deadline {
                break seen;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert_eq!(seen, ["req_first", "req_second"], "{:?}", database.backend);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_sees_every_row_once_under_concurrent_writers() {
    for (database, _schema, _dir) in databases().await {
        let writers: Vec<_> = (0..6)
            .map(|writer| {
                let pool: AnyPool = database.pool.clone();
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for n in 0..30 {
                        let id = format!("req_{writer}_{n}");
                        // A 402 refusal is in the log but not in the feed.
                        let status = if n % 10 == 9 { 402 } else { 200 };
                        let mut tx = pool.begin().await.unwrap();
                        insert_row(&mut *tx, &id, status).await;
                        let pause = rand::rng().random_range(0..4);
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                        tx.commit().await.unwrap();
                        if status != 402 {
                            ids.push(id);
                        }
                    }
                    ids
                })
            })
            .collect();
        let mut position = Position::default();
        let mut seen = Vec::new();
        while !writers.iter().all(|w| w.is_finished()) {
            let (ids, reached) = drain(&database, position).await;
            seen.extend(ids);
            position = reached;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut expected = BTreeSet::new();
        for writer in writers {
            expected.extend(writer.await.unwrap());
        }
        // The feed holds back rows newer than the oldest transaction still
        // open on the server (on Postgres, any test's): poll until they pass.
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let (ids, reached) = drain(&database, position).await;
            seen.extend(ids);
            position = reached;
            let caught_up = expected.iter().all(|id| seen.contains(id));
            if caught_up || std::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let unique: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "no row twice ({:?})", database.backend);
        assert_eq!(unique, expected, "every metered row once ({:?})", database.backend);
    }
}

/// Undelivered events in the old outbox table survive the upgrade to the feed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upgrading_from_the_outbox_table_redelivers_what_was_pending() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite_url = sqlite_url(&dir.path().join("old.db"));
    let schema = PgSchema::create().await;
    let mut targets = vec![(sqlite_url, sqlx::migrate!("../core/migrations/sqlite"))];
    if let Some(schema) = &schema {
        targets.push((schema.url.clone(), sqlx::migrate!("../core/migrations/postgres")));
    }
    for (url, migrator) in targets {
        sqlx::any::install_default_drivers();
        let options: sqlx::any::AnyConnectOptions = url.parse().unwrap();
        let pool = sqlx::any::AnyPoolOptions::new().connect_with(options).await.unwrap();
        // The schema as it was before the feed (migration 5).
        migrator.run_to(5, &pool).await.unwrap();
        for n in 0..6 {
            sqlx::query(
                "INSERT INTO request_log (request_id, key_id, workspace_id, model, streamed, outcome, usage_source, \
                 cost_nano, reserved_nano, attempts, started_at_ms, duration_ms) \
                 VALUES ($1, 'key_t', 'ws_t', 'mock/small', 0, 'success', 'upstream', 7, 10, '[{\"provider\":\"a\"},{\"provider\":\"b\"}]', 1000, 5)",
            )
            .bind(format!("req_old_{n}"))
            .execute(&pool)
            .await
            .unwrap();
            // Events 0–2 were delivered to both sinks; 3–5 only to `caught-up`.
            for sink in ["behind", "caught-up"] {
                let delivered = (n < 3 || sink == "caught-up").then_some(2000_i64);
                sqlx::query(
                    "INSERT INTO metering_outbox (event_id, sink, payload, cost_nano, created_at, next_attempt_at, delivered_at) \
                     VALUES ($1, $2, '{}', 7, 1000, 1000, $3)",
                )
                .bind(format!("req_old_{n}"))
                .bind(sink)
                .bind(delivered)
                .execute(&pool)
                .await
                .unwrap();
            }
        }
        pool.close().await;

        let database = Database::open(&url, SqliteSync::Normal).await.unwrap();
        let cursor = |sink: &'static str| {
            let pool = database.pool.clone();
            async move {
                let (xid, seq): (i64, i64) = sqlx::query_as("SELECT xid, seq FROM metering_cursors WHERE sink = $1")
                    .bind(sink)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                Position { xid, seq }
            }
        };
        let (pending, _) = drain(&database, cursor("behind").await).await;
        assert_eq!(pending, ["req_old_3", "req_old_4", "req_old_5"], "{url}");
        let (pending, _) = drain(&database, cursor("caught-up").await).await;
        assert!(pending.is_empty(), "{pending:?}");
        // Old rows are complete events: attempts counted, settlement time derived.
        let rows = FeedReader::open(&database)
            .unwrap()
            .read(Position::default(), 10)
            .await
            .unwrap();
        assert_eq!(rows.len(), 6);
        assert!(
            rows.iter()
                .all(|r| r.attempt_count == 2 && r.settled_at_ms == 1005 && r.source.is_none())
        );
    }
}
