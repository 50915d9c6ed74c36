-- Change feed: one registry_change entry per view row (cluster_node →
-- NodeCapacity, cluster_namespace → ClusterNamespace) per committing
-- transaction that changed it, written by statement triggers from the
-- transition tables, so no writer can change a view row without a log entry.
--
-- The triggers rely on the writer protocol of docs/registry.md: a writer locks
-- registry_state, stamps every row it changes with a version above
-- registry_state.resource_version (the "start version"), and raises
-- registry_state.resource_version to the highest version it took just before
-- commit. A row whose version is above the start version was therefore stamped
-- by the running transaction, and so is its log entry, which later steps of
-- the same transaction fold into instead of adding a second one. Lookups of
-- such entries are bounded by resource_version > start version, a short
-- primary-key range, whatever the log's size. TRUNCATE is not logged.

CREATE TABLE registry_change (
    -- the view row's resource_version after the change (for a deletion: the
    -- version the deletion took)
    resource_version bigint PRIMARY KEY,
    kind             text COLLATE "C" NOT NULL CHECK (kind IN ('NodeCapacity', 'ClusterNamespace')),
    -- the view row's key
    cluster_id       text COLLATE "C" NOT NULL,
    name             text COLLATE "C" NOT NULL,
    type             text COLLATE "C" NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
    -- to_jsonb of the view row after the transaction (a deletion: its last
    -- state, with resource_version set to the deletion's)
    object           jsonb       NOT NULL,
    -- to_jsonb of the view row before the transaction; NULL for ADDED
    prev_object      jsonb,
    committed_at     timestamptz NOT NULL DEFAULT now()
);

-- One row: the compaction horizon. Entries with resource_version <= compacted_rv
-- are gone, so a feed is resumable from any version >= compacted_rv. History
-- starts now: versions taken before this migration are not resumable.
CREATE TABLE registry_change_horizon (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    compacted_rv bigint  NOT NULL
);
INSERT INTO registry_change_horizon (compacted_rv) SELECT resource_version FROM registry_state;

-- Inserted rows: ADDED entries.
CREATE FUNCTION registry_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
BEGIN
    IF EXISTS (SELECT 1 FROM new_rows WHERE resource_version <= start_rv) THEN
        RAISE EXCEPTION '% row inserted without a new resource_version (start %)', view_kind, start_rv;
    END IF;
    INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, object)
    SELECT n.resource_version, view_kind, n.cluster_id, n.name, 'ADDED', to_jsonb(n) FROM new_rows n;
    RETURN NULL;
END $$;

-- Updated rows that changed: a MODIFIED entry with the old row as prev, or,
-- for a row already logged by this transaction, the new state folded into
-- that entry (which keeps its type and the state before the transaction).
CREATE FUNCTION registry_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
    changed   bigint;
    logged    bigint;
BEGIN
    -- Old and new rows are paired by grouping, not by a join: the planner
    -- can estimate a transition table at one row (it does for INSERT ... ON
    -- CONFLICT), and a nested-loop join would then be quadratic.
    WITH u AS (
        SELECT false AS is_new, o.cluster_id, o.name, o.resource_version AS rv, to_jsonb(o) AS obj FROM old_rows o
        UNION ALL
        SELECT true, n.cluster_id, n.name, n.resource_version, to_jsonb(n) FROM new_rows n
    ), ch AS (
        SELECT * FROM (
            SELECT cluster_id, name,
                max(rv) FILTER (WHERE NOT is_new) AS old_rv, max(rv) FILTER (WHERE is_new) AS new_rv,
                (array_agg(obj) FILTER (WHERE NOT is_new))[1] AS old_obj, (array_agg(obj) FILTER (WHERE is_new))[1] AS new_obj
            FROM u GROUP BY cluster_id, name) p
        WHERE old_obj IS DISTINCT FROM new_obj
    ), folded AS (
        UPDATE registry_change c SET resource_version = ch.new_rv, object = ch.new_obj
        FROM ch WHERE ch.old_rv > start_rv AND ch.new_rv >= ch.old_rv
            AND c.resource_version > start_rv AND c.resource_version = ch.old_rv
        RETURNING 1
    ), added AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, object, prev_object)
        SELECT ch.new_rv, view_kind, ch.cluster_id, ch.name, 'MODIFIED', ch.new_obj, ch.old_obj
        FROM ch WHERE ch.old_rv <= start_rv AND ch.new_rv > start_rv
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM ch), (SELECT count(*) FROM folded) + (SELECT count(*) FROM added)
    INTO changed, logged;
    IF changed <> logged THEN
        RAISE EXCEPTION '% % rows changed without a new resource_version (start %)', changed - logged, view_kind, start_rv;
    END IF;
    RETURN NULL;
END $$;

-- Deleted rows: each takes a new version for its tombstone (object: the last
-- state at that version, prev: the last state). A row already logged by this
-- transaction reuses that entry: inserted then deleted leaves no entry,
-- modified then deleted becomes DELETED.
CREATE FUNCTION registry_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
    deleted   bigint;
    logged    bigint;
BEGIN
    WITH gone AS (
        SELECT o.resource_version AS rv, o.cluster_id, o.name, to_jsonb(o) AS obj FROM old_rows o
    ), dropped AS (
        DELETE FROM registry_change c USING gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type = 'ADDED'
        RETURNING 1
    ), folded AS (
        UPDATE registry_change c SET type = 'DELETED', object = g.obj FROM gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type <> 'ADDED'
        RETURNING 1
    ), fresh AS MATERIALIZED (
        SELECT nextval('registry_resource_version') AS rv, g.cluster_id, g.name, g.obj FROM gone g WHERE g.rv <= start_rv
    ), tombstones AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, object, prev_object)
        SELECT f.rv, view_kind, f.cluster_id, f.name, 'DELETED', f.obj || jsonb_build_object('resource_version', f.rv), f.obj
        FROM fresh f
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone),
        (SELECT count(*) FROM dropped) + (SELECT count(*) FROM folded) + (SELECT count(*) FROM tombstones)
    INTO deleted, logged;
    IF deleted <> logged THEN
        RAISE EXCEPTION '% % rows stamped by this transaction have no log entry (start %)', deleted - logged, view_kind, start_rv;
    END IF;
    RETURN NULL;
END $$;

-- Transition tables allow one event per trigger, hence three per table.
CREATE TRIGGER cluster_node_log_insert AFTER INSERT ON cluster_node
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_insert('NodeCapacity');
CREATE TRIGGER cluster_node_log_update AFTER UPDATE ON cluster_node
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_update('NodeCapacity');
CREATE TRIGGER cluster_node_log_delete AFTER DELETE ON cluster_node
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_delete('NodeCapacity');
CREATE TRIGGER cluster_namespace_log_insert AFTER INSERT ON cluster_namespace
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_insert('ClusterNamespace');
CREATE TRIGGER cluster_namespace_log_update AFTER UPDATE ON cluster_namespace
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_update('ClusterNamespace');
CREATE TRIGGER cluster_namespace_log_delete AFTER DELETE ON cluster_namespace
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_delete('ClusterNamespace');

-- Wake listeners when a writer publishes a new registry version; NOTIFY is
-- delivered at commit, and not at all on rollback.
CREATE FUNCTION registry_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('registry_change', NEW.resource_version::text);
    RETURN NULL;
END $$;
CREATE TRIGGER registry_state_notify AFTER UPDATE ON registry_state
    FOR EACH ROW WHEN (NEW.resource_version <> OLD.resource_version) EXECUTE FUNCTION registry_notify();
