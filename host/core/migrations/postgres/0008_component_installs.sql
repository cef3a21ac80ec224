-- Tool servers and skills installed into a workspace (see docs/components.md).
-- One row per install name; `revision` counts changes, so every gateway
-- sharing the database notices an upgrade or removal and reloads.
CREATE TABLE component_installs (
    workspace_id  TEXT NOT NULL,
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    package       TEXT NOT NULL,
    requirement   TEXT NOT NULL,
    version       TEXT NOT NULL,
    digest        TEXT NOT NULL,
    -- JSON object: the install's settings.
    config        TEXT NOT NULL,
    -- JSON array: the origins approved for outbound HTTP.
    origins       TEXT NOT NULL,
    -- JSON object: dependency name -> {"version", "digest"}, pinned at install.
    pinned        TEXT NOT NULL,
    -- JSON object: credential name -> {"placement", "origins"} (no values).
    credentials   TEXT NOT NULL,
    -- The credentials' values, sealed with the gateway's key
    -- (components.credential_key_file), bound to this workspace and name.
    sealed_credentials TEXT NOT NULL,
    revision      BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, name)
);

-- Removed installs, so other gateways drop them too; `revision` comes from
-- the same counter as the installs' own.
CREATE TABLE component_install_changes (
    revision      BIGINT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    name          TEXT NOT NULL
);
