-- Per-key and per-role tool policy (docs/mcp.md, "Tool policy"): the
-- installs and tools a key may reach over MCP. `api_keys.tools` is the
-- key's own list, a JSON array of install names and <install>__<tool>
-- names (NULL: no list of its own); `role_tool_policies` holds the
-- workspace's list for a role. A key may use an item only when each list
-- that exists allows it.
ALTER TABLE api_keys ADD COLUMN tools TEXT;

CREATE TABLE role_tool_policies (
    workspace_id TEXT NOT NULL,
    role TEXT NOT NULL,
    tools TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, role)
);

-- A remote MCP server on OAuth 2.1 client credentials (docs/mcp.md): the
-- token URL, client id and scopes as JSON (NULL: a static header or none);
-- the client secret is sealed in `sealed_auth`. Tokens are held in memory only.
ALTER TABLE mcp_servers ADD COLUMN oauth TEXT;
