-- People, their keys and the audit log: as SQLite's migration 0005 says.
CREATE TABLE users (
    id           TEXT PRIMARY KEY,
    issuer       TEXT NOT NULL,
    subject      TEXT NOT NULL,
    name         TEXT NOT NULL,
    email        TEXT NOT NULL,
    role         TEXT NOT NULL,
    owner        TEXT NOT NULL UNIQUE,
    limits       TEXT NOT NULL,
    created_ms   BIGINT NOT NULL,
    last_seen_ms BIGINT,
    disabled_ms  BIGINT,
    runs         BIGINT NOT NULL DEFAULT 0,
    model_ms     BIGINT NOT NULL DEFAULT 0,
    model_day    BIGINT NOT NULL DEFAULT 0,
    model_day_ms BIGINT NOT NULL DEFAULT 0,
    UNIQUE (issuer, subject)
);

ALTER TABLE api_keys ADD COLUMN user_id TEXT REFERENCES users (id);
CREATE INDEX api_keys_user ON api_keys (user_id);
-- Names are one person's: two people may each have a key named `laptop`.
DROP INDEX api_keys_live_name;
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (COALESCE(user_id, ''), name) WHERE revoked_ms IS NULL;

CREATE TABLE audit_log (
    id      BIGSERIAL PRIMARY KEY,
    at_ms   BIGINT NOT NULL,
    actor   TEXT,
    action  TEXT NOT NULL,
    subject TEXT,
    detail  TEXT NOT NULL
);
