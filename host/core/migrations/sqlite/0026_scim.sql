-- SCIM 2.0 provisioning (host/scim, docs/scim.md): a workspace's bearer
-- tokens, its group-to-role mapping, and the users and groups its identity
-- provider manages. Memberships stay in `memberships`; these rows hold what
-- SCIM says of them (active, external ids, names).
CREATE TABLE scim_tokens (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    token_hash    TEXT NOT NULL UNIQUE,
    hint          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT
);
CREATE TABLE scim_settings (
    workspace_id  TEXT PRIMARY KEY REFERENCES workspaces(id),
    group_roles   TEXT NOT NULL,
    default_role  TEXT NOT NULL
);
CREATE TABLE scim_users (
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    user_name     TEXT NOT NULL,
    external_id   TEXT,
    display_name  TEXT,
    given_name    TEXT,
    family_name   TEXT,
    active        BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);
CREATE UNIQUE INDEX scim_users_name ON scim_users (workspace_id, user_name);
CREATE TABLE scim_groups (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    display_name  TEXT NOT NULL,
    external_id   TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
CREATE UNIQUE INDEX scim_groups_name ON scim_groups (workspace_id, display_name);
CREATE TABLE scim_group_members (
    group_id      TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
