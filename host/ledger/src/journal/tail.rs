//! Reading the journal from where the database's record of it ends: the
//! writer follows the appender through the segments, reading only records
//! whose append finished (the caller says up to which).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{frame, segment_path};

/// One record read back.
#[derive(Debug)]
pub struct Record {
    pub seq: u64,
    pub payload: Vec<u8>,
}

/// A reading position in the journal.
pub struct Tail {
    dir: PathBuf,
    /// The next record to read.
    next_seq: u64,
    /// The segment being read, and its bytes read but not yet consumed.
    open: Option<File>,
    buffer: Vec<u8>,
    consumed: usize,
}

impl Tail {
    /// A tail positioned after `applied` (records through it are skipped).
    pub fn after(dir: &Path, applied: u64) -> Self {
        Self {
            dir: dir.to_path_buf(),
            next_seq: applied + 1,
            open: None,
            buffer: Vec::new(),
            consumed: 0,
        }
    }

    /// Reads up to `max` records, none past `through`.
    pub fn read(&mut self, through: u64, max: usize) -> io::Result<Vec<Record>> {
        let mut records = Vec::new();
        while records.len() < max && self.next_seq <= through {
            if self.open.is_none() {
                self.open_segment_holding(self.next_seq)?;
            }
            match frame::decode(&self.buffer[self.consumed..]) {
                frame::Decoded::Record { seq, payload, size } => {
                    self.consumed += size;
                    if seq < self.next_seq {
                        continue;
                    }
                    if seq != self.next_seq {
                        return Err(io::Error::other(format!(
                            "journal record {seq} found where {} was due",
                            self.next_seq
                        )));
                    }
                    records.push(Record {
                        seq,
                        payload: payload.to_vec(),
                    });
                    self.next_seq += 1;
                }
                frame::Decoded::Short => {
                    if self.fill()? == 0 {
                        // This segment is done; the record due starts the next.
                        self.open = None;
                        let next = segment_path(&self.dir, self.next_seq);
                        if !next.exists() {
                            return Err(io::Error::other(format!(
                                "journal record {} is neither in its segment nor in {}",
                                self.next_seq,
                                next.display()
                            )));
                        }
                    }
                }
                frame::Decoded::Bad(damage) => {
                    return Err(io::Error::other(format!(
                        "journal record {} is damaged: {damage}",
                        self.next_seq
                    )));
                }
            }
        }
        Ok(records)
    }

    /// Opens the newest segment starting at or before `seq`.
    fn open_segment_holding(&mut self, seq: u64) -> io::Result<()> {
        let first = super::list_segments(&self.dir)?
            .into_iter()
            .rev()
            .find(|&first| first <= seq)
            .ok_or_else(|| io::Error::other(format!("no journal segment holds record {seq}")))?;
        self.open = Some(File::open(segment_path(&self.dir, first))?);
        self.buffer.clear();
        self.consumed = 0;
        Ok(())
    }

    /// Reads what the open segment has gained; returns how many bytes.
    fn fill(&mut self) -> io::Result<usize> {
        if self.consumed > 0 {
            self.buffer.drain(..self.consumed);
            self.consumed = 0;
        }
        let file = self.open.as_mut().expect("an open segment");
        file.read_to_end(&mut self.buffer)
    }
}
