-- The PostgreSQL schema: the same tables as SQLite's migrations 0001-0004
-- (see server/migrations for what each column holds), in PostgreSQL's types.

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,            -- hyphenated UUID
    owner       TEXT NOT NULL,               -- the owner id (cookie or key)
    title       TEXT NOT NULL DEFAULT '',    -- the first question, or a rename
    created_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    forked_from TEXT                         -- the share token it was forked from
);

CREATE INDEX sessions_by_owner ON sessions (owner, updated_ms DESC);

CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,              -- 1, 2, 3... without gaps
    ts_ms      BIGINT NOT NULL,
    kind       TEXT NOT NULL,                -- the event's kind, for queries by hand
    body       TEXT NOT NULL,                -- the event as JSON (app::protocol::EventBody)
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE shares (
    token      TEXT PRIMARY KEY,             -- 256 random bits, base64url
    session_id TEXT NOT NULL UNIQUE REFERENCES sessions (id) ON DELETE CASCADE,
    upto_seq   BIGINT NOT NULL,              -- the link shows events up to here
    files      BOOLEAN NOT NULL DEFAULT FALSE,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,           -- hyphenated UUID; access tokens name it
    serial       BIGSERIAL NOT NULL,         -- the order keys were made in
    name         TEXT NOT NULL,
    digest       TEXT NOT NULL UNIQUE,       -- hex SHA-256 of the whole key
    prefix       TEXT NOT NULL,              -- the key's first characters, for lists
    created_ms   BIGINT NOT NULL,
    last_used_ms BIGINT,
    revoked_ms   BIGINT                      -- set once; a revoked key never works again
);

CREATE UNIQUE INDEX api_keys_live_name ON api_keys (name) WHERE revoked_ms IS NULL;

-- Secrets every node must share, made by the first node that needs one:
-- `token` signs the access tokens of /v1 and the pages' sign-in (SQLite
-- installs keep theirs in <data-dir>/auth-secret).
CREATE TABLE secrets (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- The runcell nodes using this database, each with its last heartbeat (the
-- database's clock). Until sessions can move between nodes, one live node
-- at a time: a second one refuses to start.
CREATE TABLE nodes (
    id         TEXT PRIMARY KEY,             -- random, per process
    addr       TEXT NOT NULL,                -- where it listens, for messages
    started_ms BIGINT NOT NULL,
    seen_ms    BIGINT NOT NULL
);
