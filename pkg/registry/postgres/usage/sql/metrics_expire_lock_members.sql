-- The members with usage nothing has confirmed since $1 (metrics_usage_stale)
-- whose lock ($2, MemberLockClass) is free, locked to the end of the
-- transaction: expiry stamps only their rows (samples_nodes.go). A
-- try-lock, so a busy member is skipped, never waited for.
WITH {{metrics_usage_stale}}, members AS MATERIALIZED (
	SELECT cluster_id FROM stale_nodes UNION SELECT cluster_id FROM stale_namespaces
)
SELECT coalesce(array_agg(cluster_id), '{}') FROM members WHERE pg_try_advisory_xact_lock($2, hashtext(cluster_id))
