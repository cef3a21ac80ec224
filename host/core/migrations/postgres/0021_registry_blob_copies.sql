-- Package content kept in the database as well as in each gateway's own blob
-- store, when gateways share this database but not a blob store (the `local`
-- backend): a gateway missing a blob reads it here by digest, verifies it and
-- caches it. Rows are immutable: the key is the content's SHA-256.
CREATE TABLE registry_blob_copies (
    digest   TEXT PRIMARY KEY,
    content  BYTEA NOT NULL,
    size     BIGINT NOT NULL
);
