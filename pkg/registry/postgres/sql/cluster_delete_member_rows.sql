-- Deletes the rows of removed member $1 that are no view (no
-- resourceVersion): pods, quotas and cursors. Its usage history (the
-- metrics history and the rollups) stays, to expire with the retention, so
-- a member listed again within it has its history back.
WITH pods AS (
	DELETE FROM cluster_pod WHERE cluster_id = $1
), quotas AS (
	DELETE FROM cluster_resource_quota WHERE cluster_id = $1
)
DELETE FROM discovery_cursor WHERE cluster_id = $1
