-- cluster_capacity_node_update hands an UPDATE statement's transition tables on
-- cluster_node to cluster_capacity_add_nodes (trigger cluster_node_sum_update).
CREATE OR REPLACE FUNCTION cluster_capacity_node_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_nodes(ARRAY(SELECT n::cluster_node FROM new_rows n), ARRAY(SELECT o::cluster_node FROM old_rows o));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER cluster_node_sum_update AFTER UPDATE ON cluster_node
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_node_update();
