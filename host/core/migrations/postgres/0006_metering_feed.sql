-- Usage events are derived from the request log instead of copied into an
-- outbox: the settle transaction already writes the request_log row, so an event
-- costs the request path no extra write. Each sink keeps a cursor into the log.
--
-- Postgres hands out sequence numbers at insert but commits in any order, so a
-- cursor on seq alone could pass a row whose transaction commits late. Rows
-- also record their transaction id (xid): a reader takes only rows whose xid is
-- below its snapshot's xmin (every such transaction has ended, so no such row
-- can still appear) and orders them by (xid, seq).
ALTER TABLE request_log ADD COLUMN seq BIGSERIAL;
-- Existing rows get 0; the volatile default applies to new rows only.
ALTER TABLE request_log ADD COLUMN xid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE request_log ALTER COLUMN xid SET DEFAULT (pg_current_xact_id()::text::bigint);
ALTER TABLE request_log ADD COLUMN attempt_count BIGINT;
ALTER TABLE request_log ADD COLUMN settled_at_ms BIGINT;
-- The gateway instance that served the request (the event's `source`).
ALTER TABLE request_log ADD COLUMN source TEXT;
UPDATE request_log SET attempt_count = json_array_length(attempts::json), settled_at_ms = started_at_ms + duration_ms;
ALTER TABLE request_log ALTER COLUMN attempt_count SET NOT NULL;
ALTER TABLE request_log ALTER COLUMN settled_at_ms SET NOT NULL;
CREATE INDEX request_log_feed ON request_log (xid, seq);

-- One cursor per sink: the last (xid, seq) delivered. A dispatcher leases the
-- cursor, so gateways sharing the database take turns per sink.
CREATE TABLE metering_cursors (
    sink          TEXT PRIMARY KEY,
    xid           BIGINT NOT NULL,
    seq           BIGINT NOT NULL,
    lease_owner   TEXT,
    lease_until   BIGINT,
    failures      BIGINT NOT NULL DEFAULT 0,
    last_error    TEXT,
    updated_at    BIGINT NOT NULL
);

-- Events still undelivered in the old outbox are delivered again from the log:
-- each sink's cursor starts just before its oldest undelivered event (old rows
-- all have xid 0).
INSERT INTO metering_cursors (sink, xid, seq, updated_at)
SELECT sinks.sink, 0,
       COALESCE((SELECT MIN(r.seq) - 1 FROM metering_outbox o JOIN request_log r ON r.request_id = o.event_id
                 WHERE o.sink = sinks.sink AND o.delivered_at IS NULL),
                (SELECT COALESCE(MAX(seq), 0) FROM request_log)),
       0
FROM (SELECT DISTINCT sink FROM metering_outbox) AS sinks;
DROP TABLE metering_outbox;
