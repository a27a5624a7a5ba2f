-- Who gave a person their role: `list` (the configured `auth.admins`,
-- re-read at every sign-in, so a person taken off the list is a member on
-- their next sign-in) or `admin` (an admin on the admin page, which the
-- list never takes back). Roles given before this column are the list's.
ALTER TABLE users ADD COLUMN role_by TEXT NOT NULL DEFAULT 'list';
