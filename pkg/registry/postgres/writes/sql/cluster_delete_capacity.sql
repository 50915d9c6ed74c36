-- Deletes member $1's ClusterCapacity view row; it takes a tombstone version.
DELETE FROM cluster_capacity WHERE cluster_id = $1
