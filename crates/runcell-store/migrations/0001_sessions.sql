-- Sessions, their event log and their share links.
--
-- The event log is the record: every turn, cell, output (images included,
-- as base64 inside the event) is an event, and a session's notebook is the
-- fold of its events (app::notebook::Notebook), on the server and the page
-- alike. The other columns are what lists and links need without a fold.

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY NOT NULL,   -- hyphenated UUID
    owner       TEXT NOT NULL,               -- the owner id (cookie or key)
    title       TEXT NOT NULL DEFAULT '',    -- the first question, or a rename
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    forked_from TEXT                         -- the share token it was forked from
);

CREATE INDEX sessions_by_owner ON sessions (owner, updated_ms DESC);

CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,             -- 1, 2, 3... without gaps
    ts_ms      INTEGER NOT NULL,
    kind       TEXT NOT NULL,                -- the event's kind, for queries by hand
    body       TEXT NOT NULL,                -- the event as JSON (app::protocol::EventBody)
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE shares (
    token      TEXT PRIMARY KEY NOT NULL,    -- 256 random bits, base64url
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    upto_seq   INTEGER NOT NULL,             -- the link shows events up to here
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);

CREATE INDEX shares_by_session ON shares (session_id);
