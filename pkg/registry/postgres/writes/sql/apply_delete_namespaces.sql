-- Deletes member $1's namespace view rows named in $2 (text[]); the
-- change-log trigger gives each a tombstone version.
DELETE FROM cluster_namespace WHERE cluster_id = $1 AND name = ANY($2::text[])
