-- Accounts own workspaces; a workspace owns API keys and one wallet.
CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- Only the SHA-256 of a key is stored; the secret is shown once at creation.
CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    key_hash      BYTEA NOT NULL UNIQUE,
    hint          TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT
);
