-- Per-key request rates shared by gateways on one database (Postgres): one
-- GCRA cell per key, the theoretical arrival time in microseconds, from which
-- each gateway claims slices of admissions (identity's auth/cluster_rates.rs).
CREATE TABLE key_rate_cells (
    key_id  TEXT PRIMARY KEY,
    tat_us  BIGINT NOT NULL
);
