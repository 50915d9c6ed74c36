-- cluster_capacity_node_delete hands a DELETE statement's transition table on
-- cluster_node to cluster_capacity_add_nodes (trigger cluster_node_sum_delete).
-- PostgreSQL fires a table's triggers in name order: *_sum_* after *_log_*,
-- so the versions a deletion's tombstones take come before the capacity's.
CREATE OR REPLACE FUNCTION cluster_capacity_node_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_nodes('{}', ARRAY(SELECT o::cluster_node FROM old_rows o));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER cluster_node_sum_delete AFTER DELETE ON cluster_node
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_node_delete();
