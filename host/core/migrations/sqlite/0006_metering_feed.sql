-- Usage events are derived from the request log instead of copied into an
-- outbox: the settle transaction already writes the request_log row, so an event
-- costs the request path no extra write. Each sink keeps a cursor into the log.
--
-- request_log gains:
--   seq            commit order (SQLite serialises writers, and AUTOINCREMENT
--                  never reuses a number, so a cursor on seq misses nothing);
--   xid            always 0 here; Postgres stores the writing transaction's id;
--   attempt_count, settled_at_ms, source: the rest of the event.
CREATE TABLE request_log_v2 (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    xid               INTEGER NOT NULL DEFAULT 0,
    request_id        TEXT NOT NULL UNIQUE,
    key_id            TEXT NOT NULL,
    workspace_id      TEXT NOT NULL,
    model             TEXT NOT NULL,
    provider          TEXT,
    upstream_model    TEXT,
    streamed          INTEGER NOT NULL,
    outcome           TEXT NOT NULL,
    status            INTEGER,
    input_tokens      INTEGER,
    output_tokens     INTEGER,
    cached_tokens     INTEGER,
    reasoning_tokens  INTEGER,
    usage_source      TEXT NOT NULL,
    cost_nano         INTEGER NOT NULL,
    reserved_nano     INTEGER NOT NULL,
    snapshot_id       INTEGER,
    reservation_id    TEXT,
    attempts          TEXT NOT NULL,
    attempt_count     INTEGER NOT NULL,
    started_at_ms     INTEGER NOT NULL,
    duration_ms       INTEGER NOT NULL,
    settled_at_ms     INTEGER NOT NULL,
    -- The gateway instance that served the request (the event's `source`).
    source            TEXT
);
INSERT INTO request_log_v2 (request_id, key_id, workspace_id, model, provider, upstream_model, streamed, outcome,
    status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, reserved_nano,
    snapshot_id, reservation_id, attempts, attempt_count, started_at_ms, duration_ms, settled_at_ms)
SELECT request_id, key_id, workspace_id, model, provider, upstream_model, streamed, outcome,
    status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, reserved_nano,
    snapshot_id, reservation_id, attempts, json_array_length(attempts), started_at_ms, duration_ms,
    started_at_ms + duration_ms
FROM request_log ORDER BY rowid;
DROP TABLE request_log;
ALTER TABLE request_log_v2 RENAME TO request_log;
CREATE INDEX request_log_workspace ON request_log (workspace_id, started_at_ms);

-- One cursor per sink: the last (xid, seq) delivered. A dispatcher leases the
-- cursor, so gateways sharing a database take turns per sink.
CREATE TABLE metering_cursors (
    sink          TEXT PRIMARY KEY,
    xid           INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    lease_owner   TEXT,
    lease_until   INTEGER,
    failures      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    updated_at    INTEGER NOT NULL
);

-- Events still undelivered in the old outbox are delivered again from the log:
-- each sink's cursor starts just before its oldest undelivered event.
INSERT INTO metering_cursors (sink, xid, seq, updated_at)
SELECT sinks.sink, 0,
       COALESCE((SELECT MIN(r.seq) - 1 FROM metering_outbox o JOIN request_log r ON r.request_id = o.event_id
                 WHERE o.sink = sinks.sink AND o.delivered_at IS NULL),
                (SELECT COALESCE(MAX(seq), 0) FROM request_log)),
       0
FROM (SELECT DISTINCT sink FROM metering_outbox) AS sinks;
DROP TABLE metering_outbox;
