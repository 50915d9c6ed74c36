-- Reports member $1's namespace samples in $2 (JSON array of
-- namespaceSampleRow) on their ClusterNamespace rows when due ($3
-- threshold, $4 period in seconds; namespace_usage_due, re-checked under
-- the writers' lock). $5 is the writer's start resourceVersion. Returns how
-- many rows it stamped and the highest version.
WITH {{namespace_samples}}, reported AS (
	UPDATE cluster_namespace n SET
		usage_cpu_nanocores = s.cpu_usage_nanocores,
		usage_memory_bytes  = s.memory_usage_bytes,
		usage_pods          = s.pods,
		usage_observed_at   = s.observed_at,
		resource_version    = CASE WHEN n.resource_version > $5 THEN n.resource_version ELSE nextval('registry_resource_version') END
	FROM input s
	WHERE n.cluster_id = $1 AND n.name = s.namespace AND {{namespace_usage_due}}
	RETURNING n.resource_version
)
SELECT count(*), coalesce(max(resource_version), 0) FROM reported
