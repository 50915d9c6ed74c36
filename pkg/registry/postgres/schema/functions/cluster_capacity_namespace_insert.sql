-- cluster_capacity_namespace_insert hands an INSERT statement's transition table on
-- cluster_namespace to cluster_capacity_add_namespaces (trigger cluster_namespace_sum_insert).
CREATE OR REPLACE FUNCTION cluster_capacity_namespace_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_namespaces(ARRAY(SELECT n::cluster_namespace FROM new_rows n), '{}');
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER cluster_namespace_sum_insert AFTER INSERT ON cluster_namespace
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_namespace_insert();
