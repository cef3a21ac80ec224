//! The audit log against a real SQLite file: chaining, tampering, listing and archiving.

use serde_json::json;

use super::*;

async fn log(dir: &tempfile::TempDir) -> AuditLog {
    let url = tollgate_core::db::sqlite_url(&dir.path().join("audit.db"));
    AuditLog::new(Database::open(&url, Default::default()).await.unwrap())
}

fn change(op: &str, workspace: &str) -> Change {
    let actor = Actor {
        kind: ActorKind::Key,
        user_id: Some("usr_1".into()),
        key_id: Some("key_1".into()),
        session_id: None,
    };
    let mut change = Change::new(op, actor).workspace(workspace);
    change.params = Some(json!({"name": "ci", "api_key": "tg_live_secretsecret"}));
    change
}

#[tokio::test]
async fn rows_chain_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(&dir).await;
    let empty = log.verify().await.unwrap();
    assert_eq!((empty.rows, empty.head_seq, empty.broken), (0, 0, None));
    let first = log.append(change("keys.create", "ws_a")).await.unwrap();
    let second = log.append(change("keys.revoke", "ws_a")).await.unwrap();
    assert_eq!((first.seq, second.seq), (1, 2));
    assert_eq!(first.prev_hash, GENESIS);
    assert_eq!(second.prev_hash, first.hash);
    assert_eq!(first.params.as_ref().unwrap()["api_key"], redact::REDACTED);
    let verified = log.verify().await.unwrap();
    assert_eq!(verified.rows, 2);
    assert_eq!(verified.head_hash, second.hash);
    assert_eq!(verified.broken, None);
}

#[tokio::test]
async fn any_edit_deletion_or_truncation_breaks_the_chain() {
    let tampering = [
        ("UPDATE audit_log SET params = '{\"name\":\"cj\"}' WHERE seq = 2", 2),
        ("UPDATE audit_log SET op = 'keys.list' WHERE seq = 3", 3),
        ("DELETE FROM audit_log WHERE seq = 2", 2),
        ("DELETE FROM audit_log WHERE seq = 3", 3),
        ("UPDATE audit_log SET actor = 'not json' WHERE seq = 1", 1),
    ];
    for (statement, at) in tampering {
        let dir = tempfile::tempdir().unwrap();
        let log = log(&dir).await;
        for op in ["a.b", "c.d", "e.f"] {
            log.append(change(op, "ws_a")).await.unwrap();
        }
        sqlx::query(statement).execute(&log.database.pool).await.unwrap();
        let broken = log.verify().await.unwrap().broken;
        assert_eq!(broken.map(|b| b.seq), Some(at), "{statement}");
    }
}

#[tokio::test]
async fn lists_filter_and_page_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(&dir).await;
    for op in ["keys.create", "keys.revoke", "keys.create"] {
        log.append(change(op, "ws_a")).await.unwrap();
    }
    log.append(change("keys.create", "ws_b")).await.unwrap();
    let filter = Filter {
        workspace_id: "ws_a".into(),
        limit: 10,
        ..Default::default()
    };
    let seqs = |rows: Vec<Record>| rows.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(seqs(log.list(&filter).await.unwrap()), [3, 2, 1]);
    let creates = Filter {
        op: Some("keys.create".into()),
        ..filter.clone()
    };
    assert_eq!(seqs(log.list(&creates).await.unwrap()), [3, 1]);
    let page = Filter {
        before_seq: Some(3),
        limit: 1,
        ..filter.clone()
    };
    assert_eq!(seqs(log.list(&page).await.unwrap()), [2]);
    let by_key = Filter {
        actor: Some("key_1".into()),
        ..filter.clone()
    };
    assert_eq!(seqs(log.list(&by_key).await.unwrap()).len(), 3);
    let nobody = Filter {
        actor: Some("usr_2".into()),
        ..filter
    };
    assert!(log.list(&nobody).await.unwrap().is_empty());
}

#[tokio::test]
async fn archiving_moves_the_anchor_and_keeps_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(&dir).await;
    for op in ["a.b", "c.d", "e.f"] {
        log.append(change(op, "ws_a")).await.unwrap();
    }
    let cutoff = now_ms() + 1;
    let old = log.archivable(cutoff, 2, 100).await.unwrap();
    assert_eq!(old.len(), 2, "bounded by what the sinks have");
    assert_eq!(log.forget_through(old.last().unwrap()).await.unwrap(), 2);
    assert_eq!(log.forget_through(old.last().unwrap()).await.unwrap(), 0, "once");
    log.append(change("g.h", "ws_a")).await.unwrap();
    let verified = log.verify().await.unwrap();
    assert_eq!((verified.anchor_seq, verified.rows, verified.broken), (2, 2, None));
}
