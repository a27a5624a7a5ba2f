-- At most one live link per session, so that two Share clicks at once
-- cannot make two tokens. Keeps the newest if a race already made two.
DELETE FROM shares WHERE rowid NOT IN (SELECT MAX(rowid) FROM shares GROUP BY session_id);
DROP INDEX shares_by_session;
CREATE UNIQUE INDEX shares_one_per_session ON shares (session_id);
