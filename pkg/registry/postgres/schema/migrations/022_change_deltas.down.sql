-- Back to 021: a MODIFIED entry's prev_object is the whole state before it
-- again (NULL columns left out). Entries are converted newest first, so the
-- state after each (the next entry's prev_object, or the live row) is whole
-- when it is read.

ALTER TABLE registry_change DROP CONSTRAINT registry_change_prev;
DO $$
DECLARE
    e     record;
    after jsonb;
BEGIN
    FOR e IN SELECT resource_version, kind, cluster_id, name, prev_rv, prev_delta FROM registry_change
            WHERE type = 'MODIFIED' ORDER BY resource_version DESC LOOP
        after := coalesce((SELECT n.prev_object FROM registry_change n WHERE n.prev_rv = e.resource_version),
            CASE e.kind
                WHEN 'NodeCapacity' THEN (SELECT to_jsonb(l) FROM cluster_node l
                    WHERE l.cluster_id = e.cluster_id AND l.name = e.name AND l.resource_version = e.resource_version)
                WHEN 'ClusterNamespace' THEN (SELECT to_jsonb(l) FROM cluster_namespace l
                    WHERE l.cluster_id = e.cluster_id AND l.name = e.name AND l.resource_version = e.resource_version)
                WHEN 'ClusterCapacity' THEN (SELECT to_jsonb(l) FROM cluster_capacity l
                    WHERE l.cluster_id = e.cluster_id AND l.resource_version = e.resource_version)
            END, '{}');
        UPDATE registry_change SET prev_object = jsonb_strip_nulls(after || e.prev_delta || jsonb_build_object('resource_version', e.prev_rv))
        WHERE resource_version = e.resource_version;
    END LOOP;
END $$;
ALTER TABLE registry_change DROP COLUMN prev_delta,
    ADD CONSTRAINT registry_change_prev CHECK ((type = 'ADDED') = (prev_rv IS NULL) AND (prev_rv IS NULL) = (prev_object IS NULL));
-- Updated rows that changed: a MODIFIED entry with the old row as its
-- prev_object, or, for a row already logged by this transaction, that
-- entry moved to the new version (it keeps its type and the state before
-- the transaction).
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
        UPDATE registry_change c SET resource_version = ch.new_rv
        FROM ch WHERE ch.old_rv > start_rv AND ch.new_rv >= ch.old_rv
            AND c.resource_version > start_rv AND c.resource_version = ch.old_rv
        RETURNING 1
    ), added AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, prev_rv, prev_object)
        SELECT ch.new_rv, view_kind, ch.cluster_id, ch.name, 'MODIFIED', ch.old_rv, jsonb_strip_nulls(ch.old_obj)
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
-- transaction, the last one committed).
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
        UPDATE registry_change c SET type = 'DELETED' FROM gone g
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

DROP FUNCTION registry_change_delta(jsonb, jsonb);
