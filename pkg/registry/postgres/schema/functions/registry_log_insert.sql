-- registry_log_insert logs a view table's inserted rows (its triggers below)
-- as ADDED entries, without an image (the row is the live one, or the next
-- entry's prev_object). The change log and its writer protocol:
-- docs/registry.md, "Change feed"; updates: registry_define_log_update.
CREATE OR REPLACE FUNCTION registry_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
BEGIN
    IF EXISTS (SELECT 1 FROM new_rows WHERE resource_version <= start_rv) THEN
        RAISE EXCEPTION '% row inserted without a new resource_version (start %)', view_kind, start_rv;
    END IF;
    INSERT INTO registry_change (resource_version, kind, cluster_id, name, type)
    SELECT n.resource_version, view_kind, n.cluster_id, n.name, 'ADDED' FROM new_rows n;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER cluster_capacity_log_insert AFTER INSERT ON cluster_capacity
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_insert('ClusterCapacity');
CREATE OR REPLACE TRIGGER cluster_namespace_log_insert AFTER INSERT ON cluster_namespace
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_insert('ClusterNamespace');
CREATE OR REPLACE TRIGGER cluster_node_log_insert AFTER INSERT ON cluster_node
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_insert('NodeCapacity');
