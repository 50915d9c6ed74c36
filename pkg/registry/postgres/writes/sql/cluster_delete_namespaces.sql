-- Deletes member $1's namespace view rows; each takes a tombstone version.
DELETE FROM cluster_namespace WHERE cluster_id = $1
