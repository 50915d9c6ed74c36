-- The names of member $1's nodes (is_node) and namespaces: the rows whose
-- aggregates a relist's last batch computes.
SELECT true AS is_node, name FROM cluster_node WHERE cluster_id = $1
UNION ALL
SELECT false, name FROM cluster_namespace WHERE cluster_id = $1
