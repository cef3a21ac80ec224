-- Compact rows (docs/ledger.md, "What is kept"): holds live in memory, so the
-- journal keeps one posting per settled request plus credits and expiries,
-- and nothing per pending step.
--
-- Reservation rows and the journal's per-request reserve/release pairs of
-- settled requests go; releases of expired holds stay (they are money
-- history: a hold that ended unbilled).
DELETE FROM ledger_entries WHERE kind = 'reserve';
DELETE FROM ledger_entries WHERE kind = 'release'
    AND reservation_id IN (SELECT id FROM reservations WHERE state IN ('posted', 'voided'));
DROP TABLE reservations;

-- A hold's id lived only as long as its request; the row keeps its amount.
ALTER TABLE request_log DROP COLUMN reservation_id;

-- The journal is kept in its id order (WITHOUT ROWID), so its primary key
-- needs no separate index; ledger-verify sums it in one pass, grouped by
-- wallet, so no per-wallet index either.
CREATE TABLE ledger_entries_v2 (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    kind            TEXT NOT NULL CHECK (kind IN ('credit', 'reserve', 'post', 'release')),
    amount_nano     INTEGER NOT NULL CHECK (amount_nano >= 0),
    reservation_id  TEXT,
    created_at      INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO ledger_entries_v2 (id, workspace_id, kind, amount_nano, reservation_id, created_at)
SELECT id, workspace_id, kind, amount_nano, reservation_id, created_at FROM ledger_entries;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_v2 RENAME TO ledger_entries;

-- Only actor runs and their nested requests carry a run id.
DROP INDEX request_log_by_run;
CREATE INDEX request_log_by_run ON request_log (run_id) WHERE run_id IS NOT NULL;
