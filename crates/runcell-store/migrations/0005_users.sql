-- People: accounts made on their first sign-in (an OpenID provider's
-- issuer and subject, or a trusted proxy's header), the role they have,
-- the owner id their notebooks are kept under, their limits and whether
-- an admin has disabled them. Keys may belong to one of them, and what
-- was done to accounts and keys is kept in an audit log.
CREATE TABLE users (
    id           TEXT PRIMARY KEY NOT NULL,   -- hyphenated UUID
    issuer       TEXT NOT NULL,               -- the provider's issuer URL, or `header:<name>`
    subject      TEXT NOT NULL,               -- the provider's `sub`, or the header's value
    name         TEXT NOT NULL,
    email        TEXT NOT NULL,
    role         TEXT NOT NULL,               -- `admin` or `member`
    owner        TEXT NOT NULL UNIQUE,        -- the OwnerId their sessions are under
    limits       TEXT NOT NULL,               -- JSON: overrides of the configured defaults
    created_ms   INTEGER NOT NULL,
    last_seen_ms INTEGER,
    disabled_ms  INTEGER,                     -- set while disabled
    runs         INTEGER NOT NULL DEFAULT 0,      -- runs started in their sessions and with their keys
    model_ms     INTEGER NOT NULL DEFAULT 0,      -- time the model spent on their turns
    model_day    INTEGER NOT NULL DEFAULT 0,      -- the day (since 1970, UTC) model_day_ms counts
    model_day_ms INTEGER NOT NULL DEFAULT 0,      -- the model's time on that day
    UNIQUE (issuer, subject)
);

-- A key made by a person belongs to them; keys made on the server's
-- command line belong to nobody (NULL), as before.
ALTER TABLE api_keys ADD COLUMN user_id TEXT REFERENCES users (id);
CREATE INDEX api_keys_user ON api_keys (user_id);
-- Names are one person's: two people may each have a key named `laptop`.
DROP INDEX api_keys_live_name;
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (COALESCE(user_id, ''), name) WHERE revoked_ms IS NULL;

-- Sign-ins (and refusals), key changes and admin actions, newest last.
CREATE TABLE audit_log (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms   INTEGER NOT NULL,
    actor   TEXT,                             -- a user id; NULL for the server or its command line
    action  TEXT NOT NULL,                    -- e.g. `sign_in`, `key_created`, `user_disabled`
    subject TEXT,                             -- the user or key acted on
    detail  TEXT NOT NULL
);
