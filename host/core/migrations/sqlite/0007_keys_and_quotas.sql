-- Keys and abuse limits (see docs/control-plane.md and docs/registry.md).

-- 'user': the key acts as its user in each of the user's workspaces;
-- 'workspace': only in its own. Existing keys keep acting as their user.
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'user';
-- The key's own data-plane request limit; NULL: the gateway default.
ALTER TABLE api_keys ADD COLUMN requests_per_minute INTEGER;

-- Blob uploads counted against each workspace's registry quota. A blob is
-- counted once per workspace that uploads it (storage is shared by digest).
CREATE TABLE registry_blob_uploads (
    workspace_id  TEXT NOT NULL,
    digest        TEXT NOT NULL,
    size          INTEGER NOT NULL,
    uploaded_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, digest)
);

-- The running total per workspace, updated with a conditional UPDATE so that
-- concurrent uploads (on any gateway) cannot exceed the quota together.
CREATE TABLE registry_blob_usage (
    workspace_id  TEXT PRIMARY KEY,
    bytes         INTEGER NOT NULL
);
