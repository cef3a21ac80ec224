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

-- ledger-verify sums the journal in one pass, grouped by wallet: no per-wallet
-- index needed.
DROP INDEX ledger_entries_workspace;

-- Only actor runs and their nested requests carry a run id.
DROP INDEX request_log_by_run;
CREATE INDEX request_log_by_run ON request_log (run_id) WHERE run_id IS NOT NULL;
