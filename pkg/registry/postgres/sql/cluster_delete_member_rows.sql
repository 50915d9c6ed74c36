-- Deletes every row of member $1 that is no view (no resourceVersion): pods,
-- quotas, the metrics history and its rollups, cursors and its discovery_member row, which
-- fences out its owner.
WITH pods AS (
	DELETE FROM cluster_pod WHERE cluster_id = $1
), quotas AS (
	DELETE FROM cluster_resource_quota WHERE cluster_id = $1
), metrics AS (
	DELETE FROM cluster_node_metrics WHERE cluster_id = $1
), rollups AS (
	DELETE FROM cluster_node_usage_hourly WHERE cluster_id = $1
), namespace_rollups AS (
	DELETE FROM cluster_namespace_usage_hourly WHERE cluster_id = $1
), cursors AS (
	DELETE FROM discovery_cursor WHERE cluster_id = $1
)
DELETE FROM discovery_member WHERE cluster_id = $1
