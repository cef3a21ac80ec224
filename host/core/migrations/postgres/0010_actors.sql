-- Hosted actors (docs/actors.md). `actors` maps an actor id (SHA-1 of the
-- canonical IR) to the registry package version holding that IR; a row is
-- never updated. `actor_deployments` binds a stable URL to an actor id.
CREATE TABLE actors (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    package       TEXT NOT NULL,
    version       TEXT NOT NULL,
    digest        TEXT NOT NULL,
    ir            TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX actors_by_package ON actors (package);

CREATE TABLE actor_deployments (
    workspace_id  TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    name          TEXT NOT NULL,
    actor_id      TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE INDEX actor_deployments_by_workspace ON actor_deployments (workspace_id);

-- A run's signed provenance trail is kept with its request-log row (kind
-- `actor_run`), written in the same batch as the rest of the log.
ALTER TABLE request_log ADD COLUMN run_id TEXT;
ALTER TABLE request_log ADD COLUMN provenance TEXT;
ALTER TABLE request_log ADD COLUMN provenance_signature TEXT;
CREATE INDEX request_log_by_run ON request_log (run_id);
