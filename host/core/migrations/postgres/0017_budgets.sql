-- Spend controls (docs/billing.md, "Spend controls"): a workspace's budget and
-- per-key budgets, each a daily or monthly (UTC) USD limit, an optional cap
-- on one request's worst case, and alert thresholds. Owned by the server's
-- billing concern (host/server/src/billing/budgets.rs). `key_id` is '' for
-- the workspace's own budget; one budget per workspace and key.
CREATE TABLE budgets (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL,
    key_id            TEXT NOT NULL DEFAULT '',
    period            TEXT NOT NULL CHECK (period IN ('daily', 'monthly')),
    limit_nano        BIGINT NOT NULL CHECK (limit_nano >= 0),
    max_request_nano  BIGINT CHECK (max_request_nano >= 0),
    -- Percent integers, comma-separated in ascending order: '50,80,100'.
    alert_thresholds  TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    UNIQUE (workspace_id, key_id)
);

-- One row per budget and period ('YYYY-MM-DD' or 'YYYY-MM'). `claimed_nano`
-- is what gateways have claimed (held worst cases, settled costs, unused
-- slices): a claim is one conditional upsert (`claimed + x <= limit`), so
-- gateways sharing the database never claim past the limit together.
-- `spent_nano` is the exact billed spend, added at settlement; alert
-- thresholds are crossed on it.
CREATE TABLE budget_usage (
    budget_id     TEXT NOT NULL,
    period        TEXT NOT NULL,
    claimed_nano  BIGINT NOT NULL DEFAULT 0 CHECK (claimed_nano >= 0),
    spent_nano    BIGINT NOT NULL DEFAULT 0 CHECK (spent_nano >= 0),
    PRIMARY KEY (budget_id, period)
);

-- What a row that is not a request carries for its event (a budget alert's
-- budget, period, threshold, limit and spend), as a JSON object.
ALTER TABLE request_log ADD COLUMN detail TEXT;
