//! The file sink's rotated files: their names, the rename that rotates, zstd
//! compression and the retention count.
//!
//! `usage.jsonl` rotates to `usage.<UTC day>.<n>.jsonl` (the day its events
//! were written, `n` counting that day's files from 1), which compression
//! turns into `usage.<day>.<n>.jsonl.zst`, readable with `zstd -d` or
//! `zstdcat`. Compression writes `….zst.tmp`, syncs it, renames it into place
//! and only then removes the plain file, so a crash at any point leaves the
//! plain file or the compressed one; if both are there, the compressed one is
//! complete and the plain one is removed at the next pass. Such passes run
//! after each rotation and at start, off the dispatcher, one at a time.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file sink's rotation settings (`[[metering.sinks]]` with `kind = "file"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// 0: no size limit.
    pub max_bytes: u64,
    pub rotate_daily: bool,
    /// Rotated files kept.
    pub keep: usize,
    pub compress: bool,
}

/// zstd's default level: fast, and several times smaller for JSON lines.
const ZSTD_LEVEL: i32 = 3;

/// Where the active file and its rotated files live.
pub(super) struct Layout {
    pub active: PathBuf,
    pub rotation: Rotation,
    dir: PathBuf,
    stem: String,
    /// The active file's extension with its dot (`.jsonl`), or empty.
    ext: String,
    /// One maintenance pass at a time.
    maintenance: Mutex<()>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    Compressed,
    /// An unfinished compression.
    Partial,
}

/// One rotated file as listed.
#[derive(Clone, Debug)]
pub(super) struct Rotated {
    pub name: String,
    pub day: String,
    pub n: u32,
    pub compressed: bool,
}

impl Layout {
    pub fn new(active: PathBuf, rotation: Rotation) -> Self {
        let dir = active
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let stem = active
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let ext = active
            .extension()
            .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
        Self {
            active,
            rotation,
            dir,
            stem,
            ext,
            maintenance: Mutex::new(()),
        }
    }

    fn plain_name(&self, day: &str, n: u32) -> String {
        format!("{}.{day}.{n}{}", self.stem, self.ext)
    }

    fn parse(&self, name: &str) -> Option<(String, u32, Kind)> {
        let (name, kind) = match (name.strip_suffix(".zst.tmp"), name.strip_suffix(".zst")) {
            (Some(base), _) => (base, Kind::Partial),
            (None, Some(base)) => (base, Kind::Compressed),
            (None, None) => (name, Kind::Plain),
        };
        let middle = name
            .strip_prefix(&self.stem)?
            .strip_prefix('.')?
            .strip_suffix(&self.ext)?;
        let (day, n) = middle.split_once('.')?;
        let is_day = day.len() == 10
            && day
                .bytes()
                .enumerate()
                .all(|(i, b)| (b == b'-') == (i == 4 || i == 7) && (b == b'-' || b.is_ascii_digit()));
        Some((day.to_string(), n.parse().ok()?, kind)).filter(|_| is_day)
    }

    /// Every rotated file of this sink, oldest first (a pending compression's
    /// plain file before its compressed one).
    pub fn rotated(&self) -> std::io::Result<Vec<Rotated>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some((day, n, kind)) = self.parse(&name)
                && kind != Kind::Partial
            {
                out.push(Rotated {
                    name,
                    day,
                    n,
                    compressed: kind == Kind::Compressed,
                });
            }
        }
        out.sort_by(|a, b| (&a.day, a.n, a.compressed).cmp(&(&b.day, b.n, b.compressed)));
        Ok(out)
    }

    /// Renames the active file to the next free name of `day` (days since
    /// the epoch) and makes the rename durable.
    pub fn rotate(&self, day: i64) -> std::io::Result<()> {
        let day = chrono::DateTime::from_timestamp(day * 86_400, 0)
            .unwrap_or_default()
            .format("%Y-%m-%d")
            .to_string();
        let next = self
            .rotated()?
            .iter()
            .filter(|r| r.day == day)
            .map(|r| r.n)
            .max()
            .unwrap_or(0)
            + 1;
        let target = self.dir.join(self.plain_name(&day, next));
        std::fs::rename(&self.active, target)?;
        sync_dir(&self.dir)
    }

    /// The ids of up to `count` last events of the newest rotated file.
    pub fn newest_rotated_tail(&self, count: usize) -> std::io::Result<Vec<String>> {
        let Some(newest) = self.rotated()?.pop() else {
            return Ok(Vec::new());
        };
        let mut file = File::open(self.dir.join(&newest.name))?;
        let mut ids = Vec::new();
        if !newest.compressed {
            super::last_lines(&mut file, count, &mut ids)?;
            return Ok(ids);
        }
        let mut last = VecDeque::with_capacity(count + 1);
        for line in std::io::BufReader::new(zstd::Decoder::new(file)?).split(b'\n') {
            let line: Vec<u8> = line?;
            if let Some(id) = super::event_id(&line) {
                last.push_back(id);
                if last.len() > count {
                    last.pop_front();
                }
            }
        }
        Ok(last.into())
    }

    /// One maintenance pass: finish or redo compressions, then delete the
    /// rotated files past `keep`, oldest first. Failures are logged; the next
    /// pass tries again.
    pub fn maintain(&self) {
        let _one = self.maintenance.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(error) = self.maintain_once() {
            tracing::warn!(dir = %self.dir.display(), %error, "metering file sink: rotated-file maintenance failed");
        }
    }

    fn maintain_once(&self) -> std::io::Result<()> {
        for entry in std::fs::read_dir(&self.dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some((_, _, Kind::Partial)) = self.parse(&name) {
                remove_if_there(&self.dir.join(name))?;
            }
        }
        // (day, n) → (plain name, compressed name), oldest first.
        let mut files: BTreeMap<(String, u32), (Option<String>, Option<String>)> = BTreeMap::new();
        for rotated in self.rotated()? {
            let slot = files.entry((rotated.day, rotated.n)).or_default();
            match rotated.compressed {
                true => slot.1 = Some(rotated.name),
                false => slot.0 = Some(rotated.name),
            }
        }
        let past_keep = files.len().saturating_sub(self.rotation.keep);
        for (index, (plain, compressed)) in files.values().enumerate() {
            if index < past_keep {
                for name in [plain, compressed].into_iter().flatten() {
                    remove_if_there(&self.dir.join(name))?;
                }
                continue;
            }
            match (plain, compressed) {
                (Some(plain), Some(_)) => remove_if_there(&self.dir.join(plain))?,
                (Some(plain), None) if self.rotation.compress => self.compress(plain)?,
                _ => {}
            }
        }
        sync_dir(&self.dir)
    }

    fn compress(&self, plain: &str) -> std::io::Result<()> {
        let source = self.dir.join(plain);
        let partial = self.dir.join(format!("{plain}.zst.tmp"));
        let done = self.dir.join(format!("{plain}.zst"));
        let output = File::create(&partial)?;
        zstd::stream::copy_encode(File::open(&source)?, &output, ZSTD_LEVEL)?;
        output.sync_all()?;
        std::fs::rename(&partial, &done)?;
        sync_dir(&self.dir)?;
        std::fs::remove_file(&source)
    }
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn retention_keeps_the_newest_rotated_files_and_finishes_interrupted_compressions() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(
            dir.path().join("usage.jsonl"),
            Rotation {
                max_bytes: 0,
                rotate_daily: true,
                keep: 3,
                compress: true,
            },
        );
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("usage.jsonl", "{\"id\":\"active\"}\n");
        write("other.log", "not ours\n");
        write("usage.2026-01-01.1.jsonl.zst", "oldest");
        write("usage.2026-01-01.2.jsonl.zst", "old");
        write("usage.2026-01-02.1.jsonl.zst", "");
        // A crash after the compressed file was renamed into place, before the
        // plain one was removed.
        write("usage.2026-01-02.1.jsonl", "{\"id\":\"a\"}\n");
        // A crash during compression: the plain file stays, the partial goes.
        write("usage.2026-01-02.2.jsonl", "{\"id\":\"b\"}\n");
        write("usage.2026-01-02.2.jsonl.zst.tmp", "torn");
        // Rotated by size: n sorts as a number, not as text.
        write("usage.2026-01-02.10.jsonl", "{\"id\":\"c\"}\n");

        layout.maintain();
        assert_eq!(
            names(dir.path()),
            [
                "other.log",
                "usage.2026-01-02.1.jsonl.zst",
                "usage.2026-01-02.10.jsonl.zst",
                "usage.2026-01-02.2.jsonl.zst",
                "usage.jsonl",
            ]
        );
        let text = zstd::decode_all(File::open(dir.path().join("usage.2026-01-02.2.jsonl.zst")).unwrap()).unwrap();
        assert_eq!(text, b"{\"id\":\"b\"}\n");
        assert_eq!(layout.newest_rotated_tail(5).unwrap(), ["c"]);

        layout.rotate(20_455).unwrap(); // 2026-01-02 again
        assert!(dir.path().join("usage.2026-01-02.11.jsonl").exists());
        layout.maintain();
        let kept: Vec<String> = layout.rotated().unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(
            kept,
            [
                "usage.2026-01-02.2.jsonl.zst",
                "usage.2026-01-02.10.jsonl.zst",
                "usage.2026-01-02.11.jsonl.zst"
            ]
        );
    }
}
