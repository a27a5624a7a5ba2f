-- API keys for the /v1 API and the MCP endpoint.
--
-- A key is shown once, when it is made; only its SHA-256 digest is kept, so
-- a stolen database holds no usable key. Keys are 256 random bits, so a
-- plain digest (not a slow password hash) is enough and allows lookup.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY NOT NULL,  -- hyphenated UUID; access tokens name it
    name         TEXT NOT NULL,
    digest       TEXT NOT NULL UNIQUE,       -- hex SHA-256 of the whole key
    prefix       TEXT NOT NULL,              -- the key's first characters, for lists
    created_ms   INTEGER NOT NULL,
    last_used_ms INTEGER,
    revoked_ms   INTEGER                     -- set once; a revoked key never works again
);

-- One live key per name, so that `runcell keys revoke NAME` means one key.
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (name) WHERE revoked_ms IS NULL;
