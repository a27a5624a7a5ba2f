-- Several live nodes on one database. A session is held by one node at a
-- time (its kernel, its turns and the next `seq` live there); the others
-- follow its events through the table and NOTIFY. A lease lasts while its
-- node's heartbeat is fresh (nodes.seen_ms); a node that misses its beats
-- loses every lease it held at once, and the next node to need one of its
-- sessions takes it over.
CREATE TABLE session_leases (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    node_id    TEXT NOT NULL,
    since_ms   BIGINT NOT NULL
);

CREATE INDEX session_leases_node ON session_leases (node_id);

-- Calls from one node to the node holding a session (a turn asked for on a
-- page another node serves, a Stop, a file): written by the caller,
-- announced with NOTIFY, answered in `reply` by the holder, then deleted by
-- the caller. Nodes talk only through the database.
CREATE TABLE node_calls (
    id            BIGSERIAL PRIMARY KEY,
    caller        TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    request       TEXT NOT NULL,
    payload       BYTEA,
    taken         BOOLEAN NOT NULL DEFAULT FALSE,
    reply         TEXT,
    reply_payload BYTEA,
    created_ms    BIGINT NOT NULL
);

CREATE INDEX node_calls_callee ON node_calls (node_id) WHERE NOT taken;
