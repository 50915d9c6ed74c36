-- The NodeCapacity of node $2 of member $1.
SELECT {{node_columns}} FROM cluster_node WHERE cluster_id = $1 AND name = $2
