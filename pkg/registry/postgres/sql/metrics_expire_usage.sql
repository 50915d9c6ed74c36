-- Makes the usage of nodes whose reported sample was observed before $1
-- unknown; $2 is the writer's start resourceVersion. Returns how many rows
-- it stamped and the highest version.
WITH expired AS (
	UPDATE cluster_node n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
		usage_observed_at = NULL, usage_window_seconds = NULL,
		resource_version = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE nextval('registry_resource_version') END
	WHERE n.usage_observed_at < $1
	RETURNING n.resource_version)
SELECT count(*), coalesce(max(resource_version), 0) FROM expired
