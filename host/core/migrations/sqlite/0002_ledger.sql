-- The wallet ledger. Amounts are nano-USD integers.
--   balance  = Σ credit − Σ post             (posted balance)
--   reserved = Σ reserve − Σ release         (pending holds)
--   available = balance − reserved ≥ 0       (enforced below as a backstop)
CREATE TABLE wallets (
    workspace_id   TEXT PRIMARY KEY REFERENCES workspaces(id),
    balance_nano   INTEGER NOT NULL DEFAULT 0,
    reserved_nano  INTEGER NOT NULL DEFAULT 0,
    CHECK (reserved_nano >= 0 AND balance_nano - reserved_nano >= 0)
);

-- Immutable price lists; a price change makes a new row.
CREATE TABLE pricing_snapshots (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    digest      TEXT NOT NULL UNIQUE,
    prices      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

-- Two-phase holds: pending → posted | voided | expired.
CREATE TABLE reservations (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    amount_nano   INTEGER NOT NULL CHECK (amount_nano >= 0),
    posted_nano   INTEGER,
    snapshot_id   INTEGER NOT NULL REFERENCES pricing_snapshots(id),
    state         TEXT NOT NULL CHECK (state IN ('pending', 'posted', 'voided', 'expired')),
    expires_at    INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    settled_at    INTEGER
);
CREATE INDEX reservations_pending_expiry ON reservations (expires_at) WHERE state = 'pending';

-- Append-only journal; the id makes every write idempotent.
CREATE TABLE ledger_entries (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    kind            TEXT NOT NULL CHECK (kind IN ('credit', 'reserve', 'post', 'release')),
    amount_nano     INTEGER NOT NULL CHECK (amount_nano >= 0),
    reservation_id  TEXT,
    created_at      INTEGER NOT NULL
);
CREATE INDEX ledger_entries_workspace ON ledger_entries (workspace_id);

-- One row per request: the auditable trace.
CREATE TABLE request_log (
    request_id        TEXT PRIMARY KEY,
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
    started_at_ms     INTEGER NOT NULL,
    duration_ms       INTEGER NOT NULL
);
CREATE INDEX request_log_workspace ON request_log (workspace_id, started_at_ms);
