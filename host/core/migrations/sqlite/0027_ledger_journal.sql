-- How far each gateway's local ledger journal has been applied. The writer
-- moves a journal's mark in the same transaction that applies its records,
-- so a record is applied exactly once, even when the gateway dies between
-- that commit and deleting the record from its journal.
CREATE TABLE ledger_journal_marks (
    journal_id   TEXT PRIMARY KEY,
    applied_seq  BIGINT NOT NULL,
    applied_at   BIGINT NOT NULL
);
