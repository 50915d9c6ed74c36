-- cluster_capacity_namespace_update hands an UPDATE statement's transition tables on
-- cluster_namespace to cluster_capacity_add_namespaces (trigger cluster_namespace_sum_update).
CREATE OR REPLACE FUNCTION cluster_capacity_namespace_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_namespaces(ARRAY(SELECT n::cluster_namespace FROM new_rows n), ARRAY(SELECT o::cluster_namespace FROM old_rows o));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER cluster_namespace_sum_update AFTER UPDATE ON cluster_namespace
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_namespace_update();
