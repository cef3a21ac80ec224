//! One journal record as it lies on disk:
//!
//! ```text
//! length: u32 LE | crc32: u32 LE | seq: u64 LE | payload (length bytes)
//! ```
//!
//! The checksum covers the sequence number and the payload, so a record cut
//! short by a crash mid-write, or one whose bytes changed on disk, is told
//! apart from a whole one. Records follow each other with no padding.

use std::fmt;

/// Bytes before the payload.
pub const HEADER: usize = 16;

/// The largest payload a record may carry. A request-log row is a few
/// kilobytes at most (an actor run's provenance trail is the largest part),
/// so a length past this can only be garbage.
pub const MAX_PAYLOAD: usize = 64 << 20;

/// Appends one record to `out`.
pub fn encode(seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&checksum(seq, payload).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
}

fn checksum(seq: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// What lies at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole record, `size` bytes long in all.
    Record { seq: u64, payload: &'a [u8], size: usize },
    /// Fewer bytes than the record announces (or than a header): the rest
    /// may still be coming, or a write was cut short.
    Short,
    /// The bytes are not a record.
    Bad(Damage),
}

/// Why bytes are not a record.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Damage {
    /// The length is past [`MAX_PAYLOAD`].
    Length(u32),
    /// The checksum does not match the bytes.
    Checksum,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Length(length) => write!(f, "a record length of {length} bytes"),
            Damage::Checksum => f.write_str("a checksum mismatch"),
        }
    }
}

/// Reads the record at the start of `bytes`.
pub fn decode(bytes: &[u8]) -> Decoded<'_> {
    let Some(header) = bytes.get(..HEADER) else {
        return Decoded::Short;
    };
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("four bytes"));
    let length = word(0);
    if length as usize > MAX_PAYLOAD {
        return Decoded::Bad(Damage::Length(length));
    }
    let seq = u64::from_le_bytes(header[8..16].try_into().expect("eight bytes"));
    let size = HEADER + length as usize;
    let Some(payload) = bytes.get(HEADER..size) else {
        return Decoded::Short;
    };
    if checksum(seq, payload) != word(4) {
        return Decoded::Bad(Damage::Checksum);
    }
    Decoded::Record { seq, payload, size }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_whole_and_each_cut_reads_short() {
        let mut bytes = Vec::new();
        encode(7, b"{\"a\":1}", &mut bytes);
        encode(8, b"", &mut bytes);
        let Decoded::Record { seq, payload, size } = decode(&bytes) else {
            panic!("first record")
        };
        assert_eq!((seq, payload, size), (7, &b"{\"a\":1}"[..], HEADER + 7));
        assert_eq!(
            decode(&bytes[size..]),
            Decoded::Record {
                seq: 8,
                payload: b"",
                size: HEADER
            }
        );
        for cut in 0..size {
            assert_eq!(decode(&bytes[..cut]), Decoded::Short, "cut at {cut}");
        }
    }

    #[test]
    fn a_changed_byte_or_a_wild_length_is_damage() {
        let mut bytes = Vec::new();
        encode(1, b"payload", &mut bytes);
        for at in 4..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0x40;
            assert_eq!(decode(&changed), Decoded::Bad(Damage::Checksum), "byte {at}");
        }
        let mut wild = bytes.clone();
        wild[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&wild), Decoded::Bad(Damage::Length(u32::MAX)));
    }
}
