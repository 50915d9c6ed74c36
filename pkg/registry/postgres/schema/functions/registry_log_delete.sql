-- registry_log_delete logs a view table's deleted rows (its triggers below;
-- transition tables allow one event per trigger, hence one per table and
-- event): each takes a new version for its tombstone, whose prev_object is
-- the last state. A row already logged by this transaction reuses that
-- entry: inserted then deleted leaves no entry, modified then deleted
-- becomes DELETED (its prev_object the state before the transaction: the
-- row with the entry's delta laid over).
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
        SELECT registry_next_rv(), view_kind, g.cluster_id, g.name, 'DELETED', g.rv, jsonb_strip_nulls(g.obj)
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
CREATE OR REPLACE TRIGGER cluster_capacity_log_delete AFTER DELETE ON cluster_capacity
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_delete('ClusterCapacity');
CREATE OR REPLACE TRIGGER cluster_namespace_log_delete AFTER DELETE ON cluster_namespace
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_delete('ClusterNamespace');
CREATE OR REPLACE TRIGGER cluster_node_log_delete AFTER DELETE ON cluster_node
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_delete('NodeCapacity');
