-- The ClusterNamespace of namespace $2 of member $1.
SELECT {{namespace_columns}} FROM cluster_namespace WHERE cluster_id = $1 AND name = $2
