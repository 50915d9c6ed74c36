-- Makes the usage of nodes and namespaces whose reported sample was
-- observed before $1 unknown; $2 is the writer's start resourceVersion.
-- Returns how many rows it stamped and the highest version.
WITH nodes AS (
	UPDATE cluster_node n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
		usage_observed_at = NULL, usage_window_seconds = NULL,
		resource_version = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE nextval('registry_resource_version') END
	WHERE n.usage_observed_at < $1
	RETURNING n.resource_version
), namespaces AS (
	UPDATE cluster_namespace n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
		usage_pods = NULL, usage_observed_at = NULL,
		resource_version = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE nextval('registry_resource_version') END
	WHERE n.usage_observed_at < $1
	RETURNING n.resource_version
), expired AS (
	SELECT resource_version FROM nodes UNION ALL SELECT resource_version FROM namespaces
)
SELECT count(*), coalesce(max(resource_version), 0) FROM expired
