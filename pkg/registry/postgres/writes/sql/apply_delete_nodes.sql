-- Deletes member $1's node view rows named in $2 (text[]); the change-log
-- trigger gives each a tombstone version.
DELETE FROM cluster_node WHERE cluster_id = $1 AND name = ANY($2::text[])
