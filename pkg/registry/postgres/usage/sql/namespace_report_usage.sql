-- Reports member $1's namespace samples in $2 (JSON array of
-- namespaceSampleRow: those namespace_usage_due_names found due) on their
-- ClusterNamespace rows, re-checking namespace_usage_due under the writers'
-- lock ($3 threshold, $4 period in seconds), and makes the usage of its
-- namespaces named in $7 unknown, re-checking namespace_usage_absent with
-- the cut $5 that statement used (NULL: never). $6 is the writer's start
-- resourceVersion. Returns how many rows it stamped and the highest
-- version.
WITH {{namespace_samples}}, cut AS (SELECT $5::timestamptz AS at), reported AS (
	UPDATE cluster_namespace n SET
		usage_cpu_nanocores = s.cpu_usage_nanocores,
		usage_memory_bytes  = s.memory_usage_bytes,
		usage_pods          = s.pods,
		usage_observed_at   = s.observed_at,
		resource_version    = CASE WHEN n.resource_version > $6 THEN n.resource_version ELSE registry_next_rv() END
	FROM input s
	WHERE n.cluster_id = $1 AND n.name = s.namespace AND {{namespace_usage_due}}
	RETURNING n.resource_version
), unknown AS (
	UPDATE cluster_namespace n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
		usage_pods = NULL, usage_observed_at = NULL,
		resource_version = CASE WHEN n.resource_version > $6 THEN n.resource_version ELSE registry_next_rv() END
	WHERE n.name = ANY($7::text[]) AND {{namespace_usage_absent}}
	RETURNING n.resource_version
), stamped AS (
	SELECT resource_version FROM reported UNION ALL SELECT resource_version FROM unknown
)
SELECT count(*), coalesce(max(resource_version), 0) FROM stamped
