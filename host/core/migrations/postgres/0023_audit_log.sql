-- The admin audit log (host/audit): one row per control-plane change, in a
-- hash chain. `seq` is handed out under the chain head's lock, so seq order
-- is commit order on both backends. JSON columns are text; the hash covers
-- their RFC 8785 canonical form, not their spelling.
CREATE TABLE audit_log (
    seq           BIGINT PRIMARY KEY,
    at_ms         BIGINT NOT NULL,
    workspace_id  TEXT,
    actor         TEXT NOT NULL,
    actor_user_id TEXT,
    actor_key     TEXT,
    ip            TEXT,
    op            TEXT NOT NULL,
    target        TEXT,
    params        TEXT,
    before        TEXT,
    after         TEXT,
    outcome       TEXT NOT NULL,
    error         TEXT,
    prev_hash     TEXT NOT NULL,
    hash          TEXT NOT NULL
);
CREATE INDEX audit_log_workspace ON audit_log (workspace_id, seq);
CREATE INDEX audit_log_at ON audit_log (at_ms);

-- The chain's head (the last row appended) and its anchor (the last row
-- retention archived and deleted): verification starts from the anchor, so
-- archiving never breaks the chain.
CREATE TABLE audit_chain (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    head_seq      BIGINT NOT NULL,
    head_hash     TEXT NOT NULL,
    anchor_seq    BIGINT NOT NULL,
    anchor_hash   TEXT NOT NULL
);
INSERT INTO audit_chain (id, head_seq, head_hash, anchor_seq, anchor_hash) VALUES (
    1, 0, '0000000000000000000000000000000000000000000000000000000000000000',
    0, '0000000000000000000000000000000000000000000000000000000000000000'
);

-- How far each metering sink has delivered the audit log (its rows as
-- `dev.tollgate.audit.v1` events); apart from `metering_cursors`, whose
-- positions are request-log positions. Leased like those.
CREATE TABLE audit_cursors (
    sink          TEXT PRIMARY KEY,
    seq           BIGINT NOT NULL,
    lease_owner   TEXT,
    lease_until   BIGINT,
    updated_at    BIGINT NOT NULL
);
