//! The journal on a real directory: numbering across segments and reopens,
//! deleting applied segments, a torn or damaged tail, and `caught_up`.

use std::fs::OpenOptions;
use std::io::Write;

use super::*;

fn payload(seq: u64) -> Vec<u8> {
    format!("{{\"record\":{seq},\"pad\":\"{}\"}}", "x".repeat(40)).into_bytes()
}

/// The records after `after`, through the last one appended.
fn read_all(dir: &Path, after: u64, last: u64) -> Vec<u64> {
    Tail::after(dir, after)
        .read(last, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|record| {
            assert_eq!(record.payload, payload(record.seq));
            record.seq
        })
        .collect()
}

#[test]
fn records_read_back_in_order_across_segments_and_reopening_continues_the_numbering() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (journal, recovered) = Journal::open(dir.path(), Durability::Full).unwrap();
        assert_eq!(recovered.records, 0);
        let mut ran = 0;
        for seq in 1..=5 {
            assert_eq!(journal.append(&payload(seq), || ran += 1).unwrap(), seq);
        }
        assert_eq!((ran, journal.appended()), (5, 5));
        // A second gateway cannot open the same journal.
        let error = Journal::open(dir.path(), Durability::Normal).err().unwrap().to_string();
        assert!(error.contains("in use by another gateway"), "{error}");
        // Force a roll: the next append starts a segment named after it.
        journal.appender.lock().unwrap().size = SEGMENT_BYTES;
        journal.append(&payload(6), || {}).unwrap();
        assert_eq!(list_segments(dir.path()).unwrap(), [1, 6]);
        assert_eq!(read_all(dir.path(), 0, 6), [1, 2, 3, 4, 5, 6]);
        assert_eq!(read_all(dir.path(), 4, 6), [5, 6]);
    }
    let (journal, recovered) = Journal::open(dir.path(), Durability::Normal).unwrap();
    assert_eq!((recovered.records, recovered.dropped.is_none()), (6, true));
    assert_eq!(journal.append(&payload(7), || {}).unwrap(), 7);
    let id = journal.id().to_string();
    drop(journal);
    let (journal, _) = Journal::open(dir.path(), Durability::Normal).unwrap();
    assert_eq!(journal.id(), id, "the journal keeps its id");
    assert_eq!(read_all(dir.path(), 0, 7), [1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn applied_segments_are_deleted_but_never_the_one_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(dir.path(), Durability::Normal).unwrap();
    for seq in 1..=9 {
        if seq % 3 == 1 && seq > 1 {
            journal.appender.lock().unwrap().size = SEGMENT_BYTES;
        }
        journal.append(&payload(seq), || {}).unwrap();
    }
    assert_eq!(list_segments(dir.path()).unwrap(), [1, 4, 7]);
    journal.mark_applied(5);
    assert_eq!(list_segments(dir.path()).unwrap(), [4, 7], "4..=6 still holds record 6");
    journal.mark_applied(9);
    assert_eq!(list_segments(dir.path()).unwrap(), [7]);
    assert_eq!(journal.health().lag, 0);
    // The numbering goes on after a reopen, even with the early segments gone.
    drop(journal);
    let (journal, _) = Journal::open(dir.path(), Durability::Normal).unwrap();
    assert_eq!(journal.append(&payload(10), || {}).unwrap(), 10);
}

#[test]
fn a_torn_last_record_is_dropped_on_open_and_logged() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(dir.path(), Durability::Normal).unwrap();
    for seq in 1..=3 {
        journal.append(&payload(seq), || {}).unwrap();
    }
    drop(journal);
    let segment = segment_path(dir.path(), 1);
    let whole = std::fs::metadata(&segment).unwrap().len();
    // A fourth record whose write was cut short.
    let mut torn = Vec::new();
    frame::encode(4, &payload(4), &mut torn);
    OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap()
        .write_all(&torn[..torn.len() - 5])
        .unwrap();
    let (journal, recovered) = Journal::open(dir.path(), Durability::Normal).unwrap();
    assert_eq!(recovered.records, 3);
    let (dropped, why) = recovered.dropped.unwrap();
    assert_eq!(dropped, torn.len() as u64 - 5);
    assert!(why.contains("cut short"), "{why}");
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), whole);
    // The next record takes the torn one's number: that one was never answered.
    assert_eq!(journal.append(&payload(4), || {}).unwrap(), 4);
    assert_eq!(read_all(dir.path(), 0, 4), [1, 2, 3, 4]);
}

#[test]
fn a_changed_byte_in_the_last_record_is_dropped_but_damage_before_answered_records_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(dir.path(), Durability::Normal).unwrap();
    for seq in 1..=2 {
        journal.append(&payload(seq), || {}).unwrap();
    }
    drop(journal);
    let segment = segment_path(dir.path(), 1);
    let mut bytes = std::fs::read(&segment).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 1;
    std::fs::write(&segment, &bytes).unwrap();
    let (journal, recovered) = Journal::open(dir.path(), Durability::Normal).unwrap();
    assert_eq!(recovered.records, 1);
    assert!(recovered.dropped.unwrap().1.contains("checksum"));
    // Now damage the first segment and add a later one: records after the
    // damage were answered, so opening refuses instead of dropping them.
    journal.append(&payload(2), || {}).unwrap();
    journal.appender.lock().unwrap().size = SEGMENT_BYTES;
    journal.append(&payload(3), || {}).unwrap();
    drop(journal);
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[frame::HEADER + 2] ^= 1;
    std::fs::write(&segment, &bytes).unwrap();
    let error = Journal::open(dir.path(), Durability::Normal).err().unwrap().to_string();
    assert!(error.contains("damaged at byte 0"), "{error}");
}

#[tokio::test]
async fn caught_up_waits_for_the_writer_to_apply_what_was_appended() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(dir.path(), Durability::Normal).unwrap();
    journal.append(&payload(1), || {}).unwrap();
    assert!(!journal.caught_up(Duration::from_millis(20)).await);
    let waiting = tokio::spawn({
        let journal = journal.clone();
        async move { journal.caught_up(Duration::from_secs(5)).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    journal.mark_applied(1);
    assert!(waiting.await.unwrap());
}
