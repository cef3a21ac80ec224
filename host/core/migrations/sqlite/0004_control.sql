-- Control plane: users, their roles in workspaces, namespaces, key ownership,
-- and A2A tasks. A key acts as its user; the user's role in a workspace decides
-- what the key may do there (see docs/control-plane.md).
CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE memberships (
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    user_id       TEXT NOT NULL REFERENCES users(id),
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- Deleted workspaces keep their rows (the ledger references them) but vanish
-- from every view; their keys are revoked.
ALTER TABLE workspaces ADD COLUMN plan TEXT NOT NULL DEFAULT 'free';
ALTER TABLE workspaces ADD COLUMN deleted_at INTEGER;

-- Keys made before this migration have no user and act as the workspace owner.
ALTER TABLE api_keys ADD COLUMN user_id TEXT REFERENCES users(id);
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';

CREATE TABLE namespaces (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    name          TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    UNIQUE (workspace_id, name)
);

-- A2A tasks, visible only to their owner (a user id).
CREATE TABLE a2a_tasks (
    id             TEXT PRIMARY KEY,
    owner          TEXT NOT NULL,
    context_id     TEXT NOT NULL,
    state          TEXT NOT NULL,
    task           TEXT NOT NULL,
    updated_at_ms  INTEGER NOT NULL
);
CREATE INDEX a2a_tasks_owner ON a2a_tasks (owner, id);
