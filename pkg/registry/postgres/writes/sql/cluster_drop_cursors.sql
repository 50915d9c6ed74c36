-- Drops member $1's cursors (its identity changed: they are another
-- cluster's resourceVersions).
DELETE FROM discovery_cursor WHERE cluster_id = $1
