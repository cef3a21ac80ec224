-- The Files and Batch APIs (host/batches). A file's bytes live in the blob
-- store under their digest; its row says whose it is and what for.
CREATE TABLE files (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    purpose        TEXT NOT NULL,
    filename       TEXT NOT NULL,
    bytes          BIGINT NOT NULL,
    digest         TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    deleted_at_ms  BIGINT
);
CREATE INDEX files_by_workspace ON files (workspace_id, created_at_ms);

-- A batch: its caller (the key's principal, as JSON), its input and its
-- progress. A gateway runs it while it holds the lease; one that dies
-- leaves the lease to expire and another (or itself, restarted) resumes
-- from the lines that have no result yet.
CREATE TABLE batches (
    id                 TEXT PRIMARY KEY,
    workspace_id       TEXT NOT NULL,
    principal          TEXT NOT NULL,
    endpoint           TEXT NOT NULL,
    input_file_id      TEXT NOT NULL,
    completion_window  TEXT NOT NULL,
    metadata           TEXT,
    status             TEXT NOT NULL,
    total              BIGINT NOT NULL,
    output_file_id     TEXT,
    error_file_id      TEXT,
    created_at_ms      BIGINT NOT NULL,
    expires_at_ms      BIGINT NOT NULL,
    in_progress_at_ms  BIGINT,
    finalizing_at_ms   BIGINT,
    completed_at_ms    BIGINT,
    expired_at_ms      BIGINT,
    cancelling_at_ms   BIGINT,
    cancelled_at_ms    BIGINT,
    failed_at_ms       BIGINT,
    -- Why a batch failed, as OpenAI's `errors` object (JSON).
    errors             TEXT,
    lease_until_ms     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX batches_by_workspace ON batches (workspace_id, created_at_ms);

-- One row per line that has run: its place in the output (ok) or error
-- file, as the JSONL line written there.
CREATE TABLE batch_results (
    batch_id  TEXT NOT NULL,
    line      BIGINT NOT NULL,
    ok        BIGINT NOT NULL,
    result    TEXT NOT NULL,
    PRIMARY KEY (batch_id, line)
);
