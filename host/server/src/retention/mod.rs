//! Retention. The audit log's rows past `[retention] audit_log_days` move to
//! the archive with the chain's anchor moved past them ([`archive_audit`]).
//! Request-log rows older than `[retention] request_log_days`, and
//! delivered to every metering sink, move to an archive in the blob store
//! (zstd JSON Lines, one directory per UTC day; see `archive.rs`) and leave
//! the database, which then gives the space back. Journal postings stay:
//! money history is never deleted.
//!
//! Each file is stored before its rows are deleted, so a crash in between
//! archives those rows again next time (a request may then appear in two
//! files, identically), and never loses one. Gateways sharing a database may
//! all run it: they archive the same rows at worst twice.

mod archive;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use tollgate_core::db::{Database, now_ms};
use tollgate_ledger::archive::{self as log_archive, ArchivedRow, FeedPosition};
use tollgate_registry::StorageConfig;

pub use archive::Archive;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Rows read (and deleted) per statement: small enough that a delete never
/// holds the write lock for long.
const PAGE_ROWS: usize = 1_000;

/// `[retention]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Request-log rows older than this many days (by settlement) move to the
    /// archive; 0 keeps them in the database forever.
    pub request_log_days: u32,
    /// Audit-log rows older than this many days (and delivered to every
    /// metering sink) move to the archive, under `audit_log/`; the chain
    /// keeps the last archived row's hash as its anchor. 0 keeps them in the
    /// database forever.
    pub audit_log_days: u32,
    /// How often a gateway looks for rows to archive (seconds).
    pub interval_secs: u64,
    /// Most requests in one archive file.
    pub rows_per_file: usize,
    /// Where archive files go: the same keys as `[registry.storage]`;
    /// `{ backend = "local" }` (the default) is `<data_dir>/archive`.
    pub store: StorageConfig,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            request_log_days: 30,
            audit_log_days: 365,
            interval_secs: 3_600,
            rows_per_file: 50_000,
            store: StorageConfig::Local,
        }
    }
}

impl RetentionConfig {
    pub fn open_archive(&self, data_dir: &Path) -> anyhow::Result<Archive> {
        Archive::open(&self.store, &data_dir.join("archive"))
    }
}

/// What one pass did.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub archived: u64,
    pub deleted: u64,
    pub files: Vec<String>,
    /// Audit-log rows archived (and deleted).
    pub audit_archived: u64,
    /// The database was converted to incremental vacuum (once, on SQLite).
    pub converted_to_incremental_vacuum: bool,
}

/// Archives and deletes every row that settled more than `days` before
/// `now_ms` and that every sink has delivered, then reclaims the space.
pub async fn run_once(
    database: &Database,
    archive: &Archive,
    days: u32,
    rows_per_file: usize,
    now_ms: i64,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    if days == 0 {
        return Ok(report);
    }
    let cutoff = now_ms - i64::from(days) * DAY_MS;
    let delivered = tollgate_metering::delivered_everywhere(database).await?;
    let up_to = (delivered.xid, delivered.seq);
    let mut after: FeedPosition = (-1, -1);
    let mut file: Vec<ArchivedRow> = Vec::new();
    loop {
        let page = log_archive::page(database, after, up_to, cutoff, PAGE_ROWS).await?;
        let last_page = page.last;
        for row in page.rows {
            after = row.position;
            let other_day = file.first().is_some_and(|first| day(first) != day(&row));
            if other_day || file.len() >= rows_per_file.max(1) {
                flush(database, archive, &mut file, cutoff, &mut report).await?;
            }
            file.push(row);
        }
        if last_page {
            break;
        }
    }
    flush(database, archive, &mut file, cutoff, &mut report).await?;
    if report.deleted > 0 {
        report.converted_to_incremental_vacuum = database.reclaim_space().await?;
    }
    Ok(report)
}

fn day(row: &ArchivedRow) -> i64 {
    row.settled_at_ms.div_euclid(DAY_MS)
}

/// Stores `rows` as one file, then deletes them from the log.
async fn flush(
    database: &Database,
    archive: &Archive,
    rows: &mut Vec<ArchivedRow>,
    cutoff: i64,
    report: &mut Report,
) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let path = archive.store(rows).await?;
    report.archived += rows.len() as u64;
    report.files.push(path);
    // The file is stored: now the rows may go, a page at a time. They are
    // consecutive in the feed, so each chunk's range holds only them.
    let positions: Vec<FeedPosition> = rows.iter().map(|row| row.position).collect();
    for chunk in positions.chunks(PAGE_ROWS) {
        let (from, to) = (chunk[0], chunk[chunk.len() - 1]);
        report.deleted += log_archive::delete(database, from, to, cutoff).await?;
    }
    rows.clear();
    Ok(())
}

/// Archives the audit log's rows appended more than `days` before `now_ms`
/// and delivered to every sink, oldest first, a file at a time; each file is
/// stored before its rows leave the database and the anchor moves past them.
pub async fn archive_audit(
    database: &Database,
    archive: &Archive,
    days: u32,
    rows_per_file: usize,
    now_ms: i64,
    report: &mut Report,
) -> anyhow::Result<()> {
    if days == 0 {
        return Ok(());
    }
    let cutoff = now_ms - i64::from(days) * DAY_MS;
    let delivered = tollgate_metering::audit_delivered_everywhere(database).await?;
    let log = tollgate_audit::AuditLog::new(database.clone());
    loop {
        let rows = log
            .archivable(cutoff, delivered.unwrap_or(i64::MAX), rows_per_file.clamp(1, PAGE_ROWS))
            .await?;
        let Some(last) = rows.last() else { return Ok(()) };
        report.files.push(archive.store_audit(&rows).await?);
        report.audit_archived += log.forget_through(last).await?;
    }
}

/// Runs a pass every `interval_secs`, the first a minute after start.
pub fn start(database: Database, archive: Archive, config: RetentionConfig) {
    if config.request_log_days == 0 && config.audit_log_days == 0 {
        return;
    }
    tokio::spawn(async move {
        let mut next = Duration::from_secs(60);
        loop {
            tokio::time::sleep(next).await;
            next = Duration::from_secs(config.interval_secs.max(60));
            let mut audit = Report::default();
            if let Err(error) = archive_audit(
                &database,
                &archive,
                config.audit_log_days,
                config.rows_per_file,
                now_ms(),
                &mut audit,
            )
            .await
            {
                tracing::warn!(%error, "audit-log retention pass failed; retrying next interval");
            } else if audit.audit_archived > 0 {
                tracing::info!(archived = audit.audit_archived, "archived old audit-log rows");
            }
            match run_once(
                &database,
                &archive,
                config.request_log_days,
                config.rows_per_file,
                now_ms(),
            )
            .await
            {
                Ok(report) if report.archived > 0 => tracing::info!(
                    archived = report.archived,
                    deleted = report.deleted,
                    files = report.files.len(),
                    "archived old request-log rows"
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "request-log retention pass failed; retrying next interval"),
            }
        }
    });
}
