-- Remote MCP servers installed into a workspace (`mcp_servers.create`): the
-- gateway is their MCP client. `auth_header` names the header a static
-- credential goes in (NULL: no auth); its value is in `sealed_auth`, sealed
-- with the gateway's key for this workspace and name, never stored in clear.
CREATE TABLE mcp_servers (
    workspace_id TEXT NOT NULL,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    transport TEXT NOT NULL,
    auth_header TEXT,
    sealed_auth TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, name)
);
