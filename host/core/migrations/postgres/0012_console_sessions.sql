-- Console sign-in (docs/console.md), owned by the server's auth module.

-- A signed-in browser. The cookie holds a random token; only its SHA-256 is
-- kept. A session stands either for an API key pasted at sign-in (key_hash:
-- it lives and dies with that key) or for a user signed in through an OIDC
-- provider (user_id, acting in workspace_id with the user's role there).
CREATE TABLE console_sessions (
    id             TEXT PRIMARY KEY,
    token_hash     BYTEA NOT NULL UNIQUE,
    -- Echoed by the page in X-CSRF-Token on every call the cookie authenticates.
    csrf_token     TEXT NOT NULL,
    key_hash       BYTEA,
    user_id        TEXT,
    workspace_id   TEXT,
    -- A new user's first API key, sealed, until the console has shown it once.
    first_key      TEXT,
    created_at_ms  BIGINT NOT NULL,
    expires_at_ms  BIGINT NOT NULL,
    ended_at_ms    BIGINT
);

-- Which user an identity provider's subject is.
CREATE TABLE oidc_identities (
    provider       TEXT NOT NULL,
    subject        TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (provider, subject)
);

-- Sign-ins in flight: from the redirect to the provider until its callback,
-- which consumes the row (a state is good for one callback only).
CREATE TABLE oidc_logins (
    state          TEXT PRIMARY KEY,
    provider       TEXT NOT NULL,
    nonce          TEXT NOT NULL,
    pkce_verifier  TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL
);
