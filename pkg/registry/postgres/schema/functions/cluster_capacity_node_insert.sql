-- cluster_capacity_node_insert hands an INSERT statement's transition table on
-- cluster_node to cluster_capacity_add_nodes (trigger cluster_node_sum_insert).
CREATE OR REPLACE FUNCTION cluster_capacity_node_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_nodes(ARRAY(SELECT n::cluster_node FROM new_rows n), '{}');
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER cluster_node_sum_insert AFTER INSERT ON cluster_node
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_node_insert();
