-- Fragment (CTEs) of metrics_expire_usage and metrics_expire_lock_members:
-- the rows whose reported usage nothing has confirmed since $1. A node's is
-- confirmed by its member's usage heartbeat (cluster_capacity's
-- usage_observed_at, which a scrape moves without touching quiet nodes), so
-- only the nodes of members whose heartbeat stopped are read, through the
-- partial index of those with a usage (a single node dropping out of the
-- scrapes is caught by metrics_usage_absent); a namespace's by a sample in
-- its usage history.
stale_nodes AS (
	SELECT n.cluster_id, n.name FROM cluster_capacity c
	JOIN cluster_node n ON n.cluster_id = c.cluster_id AND n.usage_observed_at < $1
	WHERE c.usage_observed_at IS NULL OR c.usage_observed_at < $1
), stale_namespaces AS (
	SELECT n.cluster_id, n.name FROM cluster_namespace n
	WHERE n.usage_observed_at < $1 AND NOT EXISTS (SELECT 1 FROM cluster_namespace_usage_hourly h
		WHERE h.cluster_id = n.cluster_id AND h.namespace = n.name
			AND h.hour >= date_trunc('hour', $1::timestamptz, 'UTC') AND h.last_observed_at >= $1)
)
