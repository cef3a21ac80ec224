-- Payments through a processor's hosted checkout (docs/billing.md, "Payments").

-- One checkout the gateway created: a wallet top-up or a plan subscription.
-- `id` is ours and is the Idempotency-Key of the create call, so a retried
-- create never opens a second session. A webhook may credit or change
-- anything only for a row here.
CREATE TABLE checkouts (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    kind            TEXT NOT NULL CHECK (kind IN ('topup', 'subscription')),
    session_id      TEXT UNIQUE,
    -- What a paid top-up credits (nano-USD), and the same in the processor's
    -- minor unit, which the webhook's amount_total must match.
    amount_nano     INTEGER NOT NULL CHECK (amount_nano >= 0),
    amount_cents    INTEGER NOT NULL CHECK (amount_cents >= 0),
    currency        TEXT NOT NULL,
    plan            TEXT,
    state           TEXT NOT NULL CHECK (state IN ('creating', 'open', 'processing', 'paid', 'failed', 'expired')),
    checkout_url    TEXT,
    payment_intent  TEXT,
    refunded_cents  INTEGER NOT NULL DEFAULT 0,
    created_by      TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX checkouts_by_workspace ON checkouts (workspace_id, created_at);
CREATE UNIQUE INDEX checkouts_by_payment_intent ON checkouts (payment_intent) WHERE payment_intent IS NOT NULL;

-- Every processor event handled: a redelivery finds its id here and changes
-- nothing. Written in the same transaction as what the event did.
CREATE TABLE payment_events (
    event_id     TEXT PRIMARY KEY,
    type         TEXT NOT NULL,
    received_at  INTEGER NOT NULL
);

-- A workspace's subscription as the newest event applied says it is; an
-- older event delivered late is ignored.
CREATE TABLE subscriptions (
    subscription_id       TEXT PRIMARY KEY,
    workspace_id          TEXT NOT NULL REFERENCES workspaces(id),
    checkout_id           TEXT NOT NULL REFERENCES checkouts(id),
    plan                  TEXT NOT NULL,
    status                TEXT NOT NULL,
    cancel_at_period_end  INTEGER NOT NULL DEFAULT 0,
    current_period_end    INTEGER,
    event_created         INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX subscriptions_by_workspace ON subscriptions (workspace_id);

-- Workspaces whose top-ups are held (a payment was disputed) until an
-- operator releases them.
CREATE TABLE payment_holds (
    workspace_id  TEXT PRIMARY KEY REFERENCES workspaces(id),
    reason        TEXT NOT NULL,
    since         INTEGER NOT NULL
);

-- The journal gains `debit`: money taken back out of a wallet (a refunded
-- top-up). SQLite cannot alter a CHECK, so the table is rebuilt.
CREATE TABLE ledger_entries_v3 (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    kind            TEXT NOT NULL CHECK (kind IN ('credit', 'debit', 'reserve', 'post', 'release')),
    amount_nano     INTEGER NOT NULL CHECK (amount_nano >= 0),
    reservation_id  TEXT,
    created_at      INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO ledger_entries_v3 (id, workspace_id, kind, amount_nano, reservation_id, created_at)
SELECT id, workspace_id, kind, amount_nano, reservation_id, created_at FROM ledger_entries;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_v3 RENAME TO ledger_entries;
