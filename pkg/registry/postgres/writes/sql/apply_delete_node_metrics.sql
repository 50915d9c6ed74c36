-- Deletes the metrics history of member $1's nodes named in $2 (text[]) and
-- their hourly rollups; the member's own rollups (node '') keep what they
-- contributed, as the member's history.
WITH rollups AS (
	DELETE FROM cluster_node_usage_hourly WHERE cluster_id = $1 AND node = ANY($2::text[])
)
DELETE FROM cluster_node_metrics WHERE cluster_id = $1 AND node = ANY($2::text[])
