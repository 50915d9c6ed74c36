-- Deletes member $1's node view rows; each takes a tombstone version.
DELETE FROM cluster_node WHERE cluster_id = $1
