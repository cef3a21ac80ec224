-- Wallet holds live in each gateway's memory; the database keeps one row per
-- gateway and wallet with what that gateway has escrowed (granted) and how
-- much of it backs requests in flight (held, written lazily with the next
-- commit). wallets.reserved_nano = Σ granted over the rows. A gateway
-- refreshes its rows' expiry while it lives; any gateway's sweeper releases
-- the rows of one that died. Per-request reservation rows are no longer kept.
CREATE TABLE wallet_holds (
    holder        TEXT NOT NULL,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    granted_nano  BIGINT NOT NULL CHECK (granted_nano >= 0),
    held_nano     BIGINT NOT NULL CHECK (held_nano >= 0 AND held_nano <= granted_nano),
    expires_at    BIGINT NOT NULL,
    PRIMARY KEY (holder, workspace_id)
);

-- Holds an older gateway left pending become one expiring row per wallet, so
-- the sweeper releases them as it released reservations.
INSERT INTO wallet_holds (holder, workspace_id, granted_nano, held_nano, expires_at)
SELECT 'migrated', workspace_id, SUM(amount_nano), SUM(amount_nano), MAX(expires_at)
FROM reservations WHERE state = 'pending' GROUP BY workspace_id;
UPDATE reservations SET state = 'expired' WHERE state = 'pending';
