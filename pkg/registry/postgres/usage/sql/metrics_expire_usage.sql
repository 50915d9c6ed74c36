-- Makes the usage of nodes and namespaces that nothing has confirmed since
-- $1 unknown (metrics_usage_stale), at most $3 of each, of the members in
-- $4 (whose locks the transaction holds); $2 is the writer's start
-- resourceVersion. Returns how many rows it stamped and the highest
-- version.
WITH {{metrics_usage_stale}}, nodes AS (
	UPDATE cluster_node n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
		usage_observed_at = NULL, usage_window_seconds = NULL,
		resource_version = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE registry_next_rv() END
	FROM (SELECT * FROM stale_nodes WHERE cluster_id = ANY($4::text[]) LIMIT $3) s WHERE n.cluster_id = s.cluster_id AND n.name = s.name
	RETURNING n.resource_version
), namespaces AS (
	UPDATE cluster_namespace n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
		usage_pods = NULL, usage_observed_at = NULL,
		resource_version = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE registry_next_rv() END
	FROM (SELECT * FROM stale_namespaces WHERE cluster_id = ANY($4::text[]) LIMIT $3) s WHERE n.cluster_id = s.cluster_id AND n.name = s.name
	RETURNING n.resource_version
), expired AS (
	SELECT resource_version FROM nodes UNION ALL SELECT resource_version FROM namespaces
)
SELECT count(*), coalesce(max(resource_version), 0) FROM expired
