-- Plans (docs/billing.md). A limited plan's model requests per calendar month
-- (UTC) are counted here, one row per workspace and month ('YYYY-MM'); a
-- request is admitted by one conditional upsert (`requests < limit`), so
-- gateways sharing the database never admit more than the limit together.
-- Owned by the server's billing concern (host/server/src/billing/quota.rs).
CREATE TABLE plan_usage (
    workspace_id  TEXT NOT NULL,
    period        TEXT NOT NULL,
    requests      INTEGER NOT NULL DEFAULT 0 CHECK (requests >= 0),
    PRIMARY KEY (workspace_id, period)
);

-- The plan's gateway fee inside a request's cost_nano (cost_nano − fee_nano
-- is the provider's part): service.cost_breakdown and the usage event show both.
ALTER TABLE request_log ADD COLUMN fee_nano INTEGER NOT NULL DEFAULT 0;
