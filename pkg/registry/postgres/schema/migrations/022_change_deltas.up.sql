-- The change log keeps what changed (issue 25): a MODIFIED entry stores in
-- prev_delta the columns of the state before it that differ from the state
-- after it (a column that was NULL as a JSON null), not the whole state
-- before (prev_object, which DELETED entries keep). A NodeCapacity's usage
-- report took a 1.1 KB image (compressed) and a namespace's 0.6 KB; their
-- deltas are the few columns that moved. The state before an entry is the
-- state after it with its delta laid over (after || prev_delta) at version
-- prev_rv; the state
-- after it is, as since 021, the state before the next entry of the row, or
-- the live row, or a tombstone's prev_object: a reader lays the deltas of a
-- row's later entries, up to its live row or its next deletion, over that.
-- The entries kept are converted, so a watch resumes across the upgrade.

-- The keys of before whose values differ in after, but resource_version
-- (the entry's prev_rv): both are to_jsonb of a row of the same table, every
-- column a key.
CREATE FUNCTION registry_change_delta(before jsonb, after jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(b.key, b.value), '{}') FROM jsonb_each(before) b
    WHERE b.key <> 'resource_version' AND b.value IS DISTINCT FROM after -> b.key
$$;

-- A stored state (NULL columns left out) with every column of the kind's
-- table as a key, as to_jsonb gives a row.
CREATE FUNCTION registry_change_full(kind text, state jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT CASE kind
        WHEN 'NodeCapacity' THEN to_jsonb(jsonb_populate_record(NULL::cluster_node, state))
        WHEN 'ClusterNamespace' THEN to_jsonb(jsonb_populate_record(NULL::cluster_namespace, state))
        WHEN 'ClusterCapacity' THEN to_jsonb(jsonb_populate_record(NULL::cluster_capacity, state))
    END
$$;

ALTER TABLE registry_change ADD COLUMN prev_delta jsonb, DROP CONSTRAINT registry_change_prev;
-- The state after a MODIFIED entry as 021 stores it: the next entry's
-- prev_object (MODIFIED or DELETED), else the live row at its version. The
-- subqueries read the log as it was before this statement.
UPDATE registry_change c SET prev_object = NULL, prev_delta = registry_change_delta(registry_change_full(c.kind, c.prev_object),
    registry_change_full(c.kind, coalesce((SELECT n.prev_object FROM registry_change n WHERE n.prev_rv = c.resource_version),
        CASE c.kind
            WHEN 'NodeCapacity' THEN (SELECT to_jsonb(l) FROM cluster_node l
                WHERE l.cluster_id = c.cluster_id AND l.name = c.name AND l.resource_version = c.resource_version)
            WHEN 'ClusterNamespace' THEN (SELECT to_jsonb(l) FROM cluster_namespace l
                WHERE l.cluster_id = c.cluster_id AND l.name = c.name AND l.resource_version = c.resource_version)
            WHEN 'ClusterCapacity' THEN (SELECT to_jsonb(l) FROM cluster_capacity l
                WHERE l.cluster_id = c.cluster_id AND l.resource_version = c.resource_version)
        END, '{}')))
WHERE c.type = 'MODIFIED';
ALTER TABLE registry_change ADD CONSTRAINT registry_change_prev CHECK ((type = 'ADDED') = (prev_rv IS NULL)
    AND (type = 'MODIFIED') = (prev_delta IS NOT NULL) AND (type = 'DELETED') = (prev_object IS NOT NULL));
DROP FUNCTION registry_change_full(text, jsonb);

-- Updated rows that changed: a MODIFIED entry with the delta from the new
-- row to the old one, or, for a row already logged by this transaction,
-- that entry moved to the new version (it keeps its type and the state
-- before the transaction, its delta now to the new row).
CREATE OR REPLACE FUNCTION registry_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
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
        UPDATE registry_change c SET resource_version = ch.new_rv,
            prev_delta = CASE WHEN c.type = 'MODIFIED' THEN registry_change_delta(ch.old_obj || c.prev_delta, ch.new_obj) END
        FROM ch WHERE ch.old_rv > start_rv AND ch.new_rv >= ch.old_rv
            AND c.resource_version > start_rv AND c.resource_version = ch.old_rv
        RETURNING 1
    ), added AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, prev_rv, prev_delta)
        SELECT ch.new_rv, view_kind, ch.cluster_id, ch.name, 'MODIFIED', ch.old_rv, registry_change_delta(ch.old_obj, ch.new_obj)
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

-- Deleted rows: each takes a new version for its tombstone, whose
-- prev_object is the last state. A row already logged by this transaction
-- reuses that entry: inserted then deleted leaves no entry, modified then
-- deleted becomes DELETED (its prev_object the state before the
-- transaction: the row with the entry's delta laid over).
CREATE OR REPLACE FUNCTION registry_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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
        UPDATE registry_change c SET type = 'DELETED', prev_object = jsonb_strip_nulls(g.obj || c.prev_delta || jsonb_build_object('resource_version', c.prev_rv)),
            prev_delta = NULL
        FROM gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type <> 'ADDED'
        RETURNING 1
    ), tombstones AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, prev_rv, prev_object)
        SELECT nextval('registry_resource_version'), view_kind, g.cluster_id, g.name, 'DELETED', g.rv, jsonb_strip_nulls(g.obj)
        FROM gone g WHERE g.rv <= start_rv
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
