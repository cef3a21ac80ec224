-- Hosted actors (docs/actors.md). `actors` maps an actor id (SHA-1 of the
-- canonical IR) to the registry package version holding that IR; a row is
-- never updated. `actor_deployments` binds a stable URL to an actor id.
-- `actor_runs` keeps each run's signed provenance trail, keyed by run id and
-- linked to the run's request-log row.
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

CREATE TABLE actor_runs (
    run_id        TEXT PRIMARY KEY,
    request_id    TEXT NOT NULL,
    workspace_id  TEXT NOT NULL,
    actor_id      TEXT NOT NULL,
    deployment    TEXT,
    status        TEXT NOT NULL,
    cost_nanos    BIGINT NOT NULL,
    trail         TEXT NOT NULL,
    signature     TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX actor_runs_by_request ON actor_runs (request_id);
