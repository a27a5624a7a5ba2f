-- The revocation watch asks for the keys revoked since its last look (and
-- the account page for one person's keys), not for every key each time.
CREATE INDEX api_keys_revoked ON api_keys (revoked_ms) WHERE revoked_ms IS NOT NULL;
