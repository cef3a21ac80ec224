-- Package registry index (blobs live in the object store, addressed by digest).
-- Versions are immutable: a (name, version) row is never updated except for its
-- yank and deprecation flags, and never deleted, so a version can't be reused.
CREATE TABLE registry_packages (
    name          TEXT PRIMARY KEY,
    namespace     TEXT NOT NULL,
    kind          TEXT NOT NULL,
    description   TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX registry_packages_kind ON registry_packages (kind);

CREATE TABLE registry_versions (
    name          TEXT NOT NULL REFERENCES registry_packages(name),
    version       TEXT NOT NULL,
    digest        TEXT NOT NULL,
    size          BIGINT NOT NULL,
    manifest      TEXT NOT NULL,
    yanked        BIGINT NOT NULL DEFAULT 0,
    deprecated    TEXT,
    publisher     TEXT NOT NULL,
    published_at  BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);

-- The first workspace to publish in a namespace owns it there ('' = the
-- gateway's own built-ins).
CREATE TABLE registry_namespaces (
    name          TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);

-- Which adapter version serves a provider (overrides the catalog's adapter).
CREATE TABLE registry_installs (
    provider      TEXT PRIMARY KEY,
    package       TEXT NOT NULL,
    version       TEXT NOT NULL,
    digest        TEXT NOT NULL,
    installed_at  BIGINT NOT NULL
);
