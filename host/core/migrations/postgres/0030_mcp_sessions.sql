-- MCP sessions (`Mcp-Session-Id`): kept in the database, so any gateway of a
-- cluster serves a session and it survives a restart. `log_level` is the
-- client's `logging/setLevel`; `ended_at_ms` is set by the client's DELETE.
CREATE TABLE mcp_sessions (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    log_level TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    ended_at_ms BIGINT
);
CREATE INDEX mcp_sessions_created ON mcp_sessions (created_at_ms);
