-- Deletes the rows of removed member $1 that are no view (no
-- resourceVersion): pods, quotas, DRA slices and claims, and cursors. Its usage history (the
-- metrics history and the rollups) stays, to expire with the retention, so
-- a member listed again within it has its history back.
WITH pods AS (
	DELETE FROM cluster_pod WHERE cluster_id = $1
), quotas AS (
	DELETE FROM cluster_resource_quota WHERE cluster_id = $1
), slices AS (
	DELETE FROM cluster_resource_slice WHERE cluster_id = $1
), claims AS (
	DELETE FROM cluster_resource_claim WHERE cluster_id = $1
), claim_devices AS (
	DELETE FROM cluster_claim_device WHERE cluster_id = $1
)
DELETE FROM discovery_cursor WHERE cluster_id = $1
