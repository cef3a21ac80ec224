-- Signed packages (registry/src/keys.rs, signing.rs, policy.rs; docs/registry.md).
--
-- Publishers' ed25519 public keys, per registry namespace. A key id is derived
-- from the key (16 hex digits of its SHA-256). A revoked key keeps its row, so
-- it can never be added again and old signatures still name a known key.
-- `added_by` is the workspace that added it ('' = a gateway, for the built-ins).
CREATE TABLE registry_signing_keys (
    namespace     TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    public_key    TEXT NOT NULL,
    name          TEXT NOT NULL,
    added_by      TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    PRIMARY KEY (namespace, key_id)
);

-- Each version's manifest digest as published (so a manifest altered in the
-- database is refused), and its signature when signed. NULL for versions
-- published before: they are unsigned, and their manifests are not checked.
ALTER TABLE registry_versions ADD COLUMN manifest_digest TEXT;
ALTER TABLE registry_versions ADD COLUMN signature_key_id TEXT;
ALTER TABLE registry_versions ADD COLUMN signature TEXT;

-- A workspace's package policy: the namespaces ('*': all) whose packages it
-- installs only when signed by a registered, unrevoked key. No row: none.
CREATE TABLE registry_package_policies (
    workspace_id    TEXT PRIMARY KEY,
    require_signed  TEXT NOT NULL,
    updated_at      BIGINT NOT NULL
);
