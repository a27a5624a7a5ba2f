-- Who gave a person their role: as SQLite's migration 0006 says.
ALTER TABLE users ADD COLUMN role_by TEXT NOT NULL DEFAULT 'list';
