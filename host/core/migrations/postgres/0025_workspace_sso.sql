-- A workspace whose owner requires sign-in through an identity provider
-- (plans with `sso`): console sessions made with an API key are refused
-- there, and keys are created only from an OIDC session (docs/console.md).
ALTER TABLE workspaces ADD COLUMN require_sso BIGINT NOT NULL DEFAULT 0;
