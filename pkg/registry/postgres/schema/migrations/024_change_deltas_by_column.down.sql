-- Back to 023: one update log trigger function for every view table,
-- which compares to_jsonb images of the rows.

-- Updated rows that changed: a MODIFIED entry with the delta from the new
-- row to the old one, or, for a row already logged by this transaction,
-- that entry moved to the new version (it keeps its type and the state
-- before the transaction, its delta now to the new row).
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

CREATE OR REPLACE TRIGGER cluster_node_log_update AFTER UPDATE ON cluster_node
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_update('NodeCapacity');
CREATE OR REPLACE TRIGGER cluster_namespace_log_update AFTER UPDATE ON cluster_namespace
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_update('ClusterNamespace');
CREATE OR REPLACE TRIGGER cluster_capacity_log_update AFTER UPDATE ON cluster_capacity
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_update('ClusterCapacity');
DROP FUNCTION registry_log_update_cluster_node();
DROP FUNCTION registry_log_update_cluster_namespace();
DROP FUNCTION registry_log_update_cluster_capacity();
DROP FUNCTION registry_define_log_update(regclass, text);
