-- Accounts own workspaces; a workspace owns API keys and one wallet.
CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

-- Only the SHA-256 of a key is stored; the secret is shown once at creation.
CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    key_hash      BLOB NOT NULL UNIQUE,
    hint          TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER
);

-- Amounts are nano-USD integers.
CREATE TABLE wallets (
    workspace_id   TEXT PRIMARY KEY REFERENCES workspaces(id),
    balance_nano   INTEGER NOT NULL,
    reserved_nano  INTEGER NOT NULL DEFAULT 0,
    CHECK (reserved_nano >= 0 AND balance_nano - reserved_nano >= 0)
);

-- Append-only journal of wallet movements; ids make retries idempotent.
CREATE TABLE ledger_entries (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    kind          TEXT NOT NULL,
    amount_nano   INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
);
