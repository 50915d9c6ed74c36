-- The ClusterCapacity of member $1.
SELECT {{capacity_columns}} FROM cluster_capacity WHERE cluster_id = $1
