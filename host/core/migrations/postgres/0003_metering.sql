-- Transactional outbox for usage events. A row is written per (event, sink) in the
-- same transaction as the ledger settlement, so an event exists exactly when its
-- charge does; a dispatcher per sink delivers rows at least once and marks them.
CREATE TABLE metering_outbox (
    id               BIGSERIAL PRIMARY KEY,
    event_id         TEXT NOT NULL,
    sink             TEXT NOT NULL,
    -- The CloudEvent in structured JSON form, fixed at settlement so every
    -- redelivery is byte-identical.
    payload          TEXT NOT NULL,
    cost_nano        BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    -- A dispatcher holds claimed rows until this time (several gateways may
    -- share a Postgres outbox); an expired lease can be claimed again.
    lease_until      BIGINT,
    lease_owner      TEXT,
    delivered_at     BIGINT,
    last_error       TEXT,
    UNIQUE (event_id, sink)
);
CREATE INDEX metering_outbox_due ON metering_outbox (sink, next_attempt_at) WHERE delivered_at IS NULL;
CREATE INDEX metering_outbox_delivered ON metering_outbox (delivered_at) WHERE delivered_at IS NOT NULL;
-- Claimed rows are found by their claim token; without this every claim and
-- mark would scan the whole table while holding the write lock.
CREATE INDEX metering_outbox_claimed ON metering_outbox (lease_owner) WHERE lease_owner IS NOT NULL;
