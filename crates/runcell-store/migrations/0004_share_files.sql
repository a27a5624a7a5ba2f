-- Whether a share link also offers the session's files (uploads and what
-- its code wrote), as they were when it was shared. Off unless the owner
-- asks: a link shows the cells only.
ALTER TABLE shares ADD COLUMN files INTEGER NOT NULL DEFAULT 0;
