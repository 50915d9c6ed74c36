-- Deletes the hourly usage rollups of nodes and namespaces of the hours
-- that ended at or before $1, as the history partitions of those hours are
-- dropped.
WITH namespaces AS (
	DELETE FROM cluster_namespace_usage_hourly WHERE hour <= $1::timestamptz - interval '1 hour'
)
DELETE FROM cluster_node_usage_hourly WHERE hour <= $1::timestamptz - interval '1 hour'
