//! The ledger's local journal: an append-only file on the gateway's own disk
//! that settlements are written to before their answer leaves, so that the
//! answer never waits on the database. The writer (`writer.rs`) applies the
//! journal to the database in the background and then forgets what it applied.
//!
//! The journal is a directory of segments, `<first seq>.journal`, each a run
//! of [`frame`] records with consecutive sequence numbers. Appends go to the
//! newest segment; when it passes [`SEGMENT_BYTES`] it is synced and a new one
//! begins, and a segment is deleted once every record in it is applied.
//!
//! Durability ([`Durability`]): `normal` writes each record to the operating
//! system before the answer (it survives the gateway being killed, not the
//! machine losing power); `full` also fsyncs, one fsync shared by every record
//! appended while the previous one ran.
//!
//! On open, a record cut short at the end of the newest segment (a write the
//! process died in, whose request was never answered) is dropped and logged;
//! damage anywhere else stops the start, because records after it were
//! answered.

pub mod frame;
mod tail;

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};

pub use tail::{Record, Tail};

/// A segment is closed and a new one started past this size, so applied
/// records can be deleted a segment at a time.
pub const SEGMENT_BYTES: u64 = 4 << 20;

const SUFFIX: &str = ".journal";

/// When an appended record counts as durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Written to the operating system before the answer: it survives the
    /// gateway being killed, not a power loss.
    #[default]
    Normal,
    /// Also fsynced before the answer: it survives a power loss.
    Full,
}

/// The journal: its appender, and how far the writer has applied it.
pub struct Journal {
    dir: PathBuf,
    id: String,
    durability: Durability,
    appender: Mutex<Appender>,
    /// The last record whose append finished (and whose book update ran).
    appended: AtomicU64,
    /// The last record known to be fsynced (`full`).
    synced: AtomicU64,
    sync_turn: Mutex<()>,
    /// The first sequence number of every segment on disk, oldest first.
    segments: Mutex<VecDeque<u64>>,
    /// Wakes the writer after an append.
    pub(crate) wake: Notify,
    applied: watch::Sender<u64>,
    database_reachable: AtomicBool,
    /// Held for the journal's life: one gateway per journal directory.
    _lock: File,
}

struct Appender {
    file: Arc<File>,
    size: u64,
    next_seq: u64,
    buffer: Vec<u8>,
    /// A failed append could not be undone: appending more would put whole
    /// records after a damaged one, which recovery would drop.
    broken: bool,
}

/// What opening found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Whole records on disk (applied or not).
    pub records: u64,
    /// Bytes dropped from the end of the newest segment, and why.
    pub dropped: Option<(u64, String)>,
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, dropping a torn record at its
    /// end. Fails if another process holds it, or if a record other than the
    /// last is damaged.
    pub fn open(dir: &Path, durability: Durability) -> anyhow::Result<(Arc<Self>, Recovered)> {
        fs::create_dir_all(dir).with_context(|| format!("creating the ledger journal {}", dir.display()))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"))?;
        lock.try_lock().map_err(|_| {
            anyhow::anyhow!(
                "the ledger journal {} is in use by another gateway: each gateway needs its own data directory",
                dir.display()
            )
        })?;
        let id = journal_id(dir)?;
        let mut segments = list_segments(dir)?;
        let mut recovered = Recovered::default();
        let mut next_seq = 1;
        let last = segments.len().checked_sub(1);
        for (index, &first) in segments.iter().enumerate() {
            let path = segment_path(dir, first);
            let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let scan = scan(&bytes, first);
            recovered.records += scan.records;
            next_seq = first + scan.records;
            if let Some(problem) = scan.problem {
                let dropped = bytes.len() as u64 - scan.whole_bytes;
                anyhow::ensure!(
                    Some(index) == last,
                    "the ledger journal segment {} is damaged at byte {} ({problem}), and later segments hold answered \
                     requests: move the journal directory aside to start, and apply it by hand",
                    path.display(),
                    scan.whole_bytes
                );
                tracing::warn!(
                    segment = %path.display(),
                    at = scan.whole_bytes,
                    dropped_bytes = dropped,
                    %problem,
                    "dropped the ledger journal's torn tail: a write cut short by a crash, whose request was never answered"
                );
                OpenOptions::new().write(true).open(&path)?.set_len(scan.whole_bytes)?;
                recovered.dropped = Some((dropped, problem));
            }
        }
        let (file, size) = match segments.back() {
            Some(&first) => {
                let file = OpenOptions::new().append(true).open(segment_path(dir, first))?;
                let size = file.metadata()?.len();
                (file, size)
            }
            None => {
                segments.push_back(next_seq);
                (create_segment(dir, next_seq)?, 0)
            }
        };
        let journal = Arc::new(Self {
            dir: dir.to_path_buf(),
            id,
            durability,
            appender: Mutex::new(Appender {
                file: Arc::new(file),
                size,
                next_seq,
                buffer: Vec::new(),
                broken: false,
            }),
            appended: AtomicU64::new(next_seq - 1),
            synced: AtomicU64::new(next_seq - 1),
            sync_turn: Mutex::new(()),
            segments: Mutex::new(segments),
            wake: Notify::new(),
            applied: watch::Sender::new(0),
            database_reachable: AtomicBool::new(true),
            _lock: lock,
        });
        Ok((journal, recovered))
    }

    /// This journal's name in the database's record of what was applied.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one record and runs `then` before the record can be applied
    /// (the writer reads only up to [`Journal::appended`], which moves after
    /// `then`). Returns once the record is as durable as the journal's
    /// [`Durability`] promises. On an error nothing was appended and `then`
    /// did not run.
    pub fn append(&self, payload: &[u8], then: impl FnOnce()) -> io::Result<u64> {
        if payload.len() > frame::MAX_PAYLOAD {
            return Err(io::Error::other("a journal record past the size limit"));
        }
        let seq = {
            let mut guard = self.appender.lock().expect("journal appender lock");
            let appender = &mut *guard;
            if appender.broken {
                return Err(io::Error::other(
                    "the ledger journal could not undo a failed write; restart the gateway",
                ));
            }
            if appender.size >= SEGMENT_BYTES {
                self.roll(appender)?;
            }
            let seq = appender.next_seq;
            appender.buffer.clear();
            frame::encode(seq, payload, &mut appender.buffer);
            if let Err(error) = (&*appender.file).write_all(&appender.buffer) {
                // Undo a partial write, so the next record starts clean.
                if appender.file.set_len(appender.size).is_err() {
                    appender.broken = true;
                }
                return Err(error);
            }
            appender.size += appender.buffer.len() as u64;
            appender.next_seq += 1;
            then();
            self.appended.store(seq, Ordering::Release);
            seq
        };
        if self.durability == Durability::Full {
            self.sync_through(seq)?;
        }
        self.wake.notify_one();
        Ok(seq)
    }

    /// Closes the newest segment (synced, so a damaged record can only ever
    /// be at the journal's end) and starts the next.
    fn roll(&self, appender: &mut Appender) -> io::Result<()> {
        appender.file.sync_data()?;
        let file = create_segment(&self.dir, appender.next_seq)?;
        self.segments
            .lock()
            .expect("journal segments lock")
            .push_back(appender.next_seq);
        appender.file = Arc::new(file);
        appender.size = 0;
        Ok(())
    }

    /// Group commit: one fsync covers every record appended before it began,
    /// and appenders that arrive while it runs wait for the next one instead
    /// of each syncing alone.
    fn sync_through(&self, seq: u64) -> io::Result<()> {
        let sync = || {
            let _turn = self.sync_turn.lock().expect("journal sync lock");
            if self.synced.load(Ordering::Acquire) >= seq {
                return Ok(());
            }
            let (file, through) = {
                let appender = self.appender.lock().expect("journal appender lock");
                (appender.file.clone(), self.appended.load(Ordering::Acquire))
            };
            file.sync_data()?;
            self.synced.fetch_max(through, Ordering::AcqRel);
            Ok(())
        };
        if self.synced.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        match multi_thread {
            true => tokio::task::block_in_place(sync),
            false => sync(),
        }
    }

    /// The last record appended.
    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// The last record applied to the database.
    pub fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    /// The writer applied every record through `seq`: segments wholly before
    /// it are deleted.
    pub(crate) fn mark_applied(&self, seq: u64) {
        self.applied.send_if_modified(|applied| {
            let moved = seq > *applied;
            *applied = (*applied).max(seq);
            moved
        });
        let mut segments = self.segments.lock().expect("journal segments lock");
        while segments.len() > 1 && segments[1] <= seq + 1 {
            let first = segments.pop_front().expect("two segments");
            let path = segment_path(&self.dir, first);
            if let Err(error) = fs::remove_file(&path) {
                tracing::warn!(%error, segment = %path.display(), "could not delete an applied journal segment");
            }
        }
    }

    /// Waits until every record appended before the call is applied, or
    /// `timeout` passes (the database may be away). Returns whether it was.
    pub async fn caught_up(&self, timeout: Duration) -> bool {
        let target = self.appended();
        let mut applied = self.applied.subscribe();
        tokio::time::timeout(timeout, applied.wait_for(|applied| *applied >= target))
            .await
            .is_ok_and(|waited| waited.is_ok())
    }

    pub(crate) fn set_database_reachable(&self, reachable: bool) {
        self.database_reachable.store(reachable, Ordering::Relaxed);
    }

    /// What `/readyz` and the metrics show.
    pub fn health(&self) -> JournalHealth {
        let appended = self.appended();
        let applied = self.applied();
        JournalHealth {
            lag: appended.saturating_sub(applied),
            database_reachable: self.database_reachable.load(Ordering::Relaxed),
        }
    }
}

/// The journal's state as an operator sees it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct JournalHealth {
    /// Records answered but not yet in the database.
    pub lag: u64,
    /// Whether the writer's last database transaction succeeded.
    pub database_reachable: bool,
}

/// The journal's id, made once and kept beside its segments.
fn journal_id(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("ID");
    match fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_string()),
        Ok(_) => anyhow::bail!("{} is empty", path.display()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            let id = tollgate_core::db::new_id("jnl");
            let staged = dir.join("ID.new");
            let mut file = File::create(&staged)?;
            file.write_all(id.as_bytes())?;
            file.sync_all()?;
            fs::rename(&staged, &path)?;
            Ok(id)
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}{SUFFIX}"))
}

fn create_segment(dir: &Path, first_seq: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(segment_path(dir, first_seq))?;
    // The new name must survive a crash too, or recovery would not find it.
    File::open(dir)?.sync_all()?;
    Ok(file)
}

fn list_segments(dir: &Path) -> io::Result<VecDeque<u64>> {
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(first) = name.strip_suffix(SUFFIX).and_then(|n| n.parse::<u64>().ok()) {
            segments.push(first);
        }
    }
    segments.sort_unstable();
    Ok(segments.into())
}

/// What a segment holds.
struct Scan {
    records: u64,
    whole_bytes: u64,
    problem: Option<String>,
}

fn scan(bytes: &[u8], first_seq: u64) -> Scan {
    let mut at = 0;
    let mut expected = first_seq;
    let problem = loop {
        if at == bytes.len() {
            break None;
        }
        match frame::decode(&bytes[at..]) {
            frame::Decoded::Record { seq, size, .. } if seq == expected => {
                at += size;
                expected += 1;
            }
            frame::Decoded::Record { seq, .. } => break Some(format!("record {seq} where {expected} was due")),
            frame::Decoded::Short => break Some("a record cut short".into()),
            frame::Decoded::Bad(damage) => break Some(damage.to_string()),
        }
    };
    Scan {
        records: expected - first_seq,
        whole_bytes: at as u64,
        problem,
    }
}

#[cfg(test)]
mod tests;
