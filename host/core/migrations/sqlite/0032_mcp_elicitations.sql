-- Elicitations (`elicitation/create`) a tool's call is waiting on. The
-- question goes to the client on the call's SSE answer; the client's reply
-- comes back in a POST of its own, which any gateway of a cluster may
-- receive: it is stored in `answer` (the JSON-RPC result or error, as sent,
-- capped in size) and the gateway whose call waits reads it from here. A
-- reply counts only for the session (and so the workspace) that was asked,
-- and only until `expires_at_ms`. `client_elicitation` is the elicitation
-- capability the client declared at `initialize` (NULL: none), so a call
-- asks only a client that can answer.
CREATE TABLE mcp_elicitations (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    answer TEXT,
    answered_at_ms BIGINT
);
CREATE INDEX mcp_elicitations_expires ON mcp_elicitations (expires_at_ms);
ALTER TABLE mcp_sessions ADD COLUMN client_elicitation TEXT;
