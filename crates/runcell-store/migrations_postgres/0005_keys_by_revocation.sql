-- As SQLite's migration 0007 says.
CREATE INDEX api_keys_revoked ON api_keys (revoked_ms) WHERE revoked_ms IS NOT NULL;
