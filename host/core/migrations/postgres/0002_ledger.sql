-- The wallet ledger. Amounts are nano-USD integers.
--   balance  = Σ credit − Σ post             (posted balance)
--   reserved = Σ reserve − Σ release         (pending holds)
--   available = balance − reserved ≥ 0       (enforced below as a backstop)
CREATE TABLE wallets (
    workspace_id   TEXT PRIMARY KEY REFERENCES workspaces(id),
    balance_nano   BIGINT NOT NULL DEFAULT 0,
    reserved_nano  BIGINT NOT NULL DEFAULT 0,
    CHECK (reserved_nano >= 0 AND balance_nano - reserved_nano >= 0)
);

-- Immutable price lists; a price change makes a new row.
CREATE TABLE pricing_snapshots (
    id          BIGSERIAL PRIMARY KEY,
    digest      TEXT NOT NULL UNIQUE,
    prices      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- Two-phase holds: pending → posted | voided | expired.
CREATE TABLE reservations (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    amount_nano   BIGINT NOT NULL CHECK (amount_nano >= 0),
    posted_nano   BIGINT,
    snapshot_id   BIGINT NOT NULL REFERENCES pricing_snapshots(id),
    state         TEXT NOT NULL CHECK (state IN ('pending', 'posted', 'voided', 'expired')),
    expires_at    BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    settled_at    BIGINT
);
CREATE INDEX reservations_pending_expiry ON reservations (expires_at) WHERE state = 'pending';

-- Append-only journal; the id makes every write idempotent.
CREATE TABLE ledger_entries (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    kind            TEXT NOT NULL CHECK (kind IN ('credit', 'reserve', 'post', 'release')),
    amount_nano     BIGINT NOT NULL CHECK (amount_nano >= 0),
    reservation_id  TEXT,
    created_at      BIGINT NOT NULL
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
    streamed          BIGINT NOT NULL,
    outcome           TEXT NOT NULL,
    status            BIGINT,
    input_tokens      BIGINT,
    output_tokens     BIGINT,
    cached_tokens     BIGINT,
    reasoning_tokens  BIGINT,
    usage_source      TEXT NOT NULL,
    cost_nano         BIGINT NOT NULL,
    reserved_nano     BIGINT NOT NULL,
    snapshot_id       BIGINT,
    reservation_id    TEXT,
    attempts          TEXT NOT NULL,
    started_at_ms     BIGINT NOT NULL,
    duration_ms       BIGINT NOT NULL
);
CREATE INDEX request_log_workspace ON request_log (workspace_id, started_at_ms);
