-- Reports the due samples among $1 (JSON array of sampleRow) on the view
-- rows, re-checking the rule ($2 threshold, $3 period in seconds); $4 is the
-- writer's start resourceVersion (a row stamped by this transaction keeps its
-- version). Returns how many rows it stamped and the highest version.
WITH {{metrics_samples}}, reported AS (
	UPDATE cluster_node n SET
		usage_cpu_nanocores  = s.cpu_usage_nanocores,
		usage_memory_bytes   = s.memory_usage_bytes,
		usage_observed_at    = s.observed_at,
		usage_window_seconds = s.window_seconds,
		resource_version     = CASE WHEN n.resource_version > $4 THEN n.resource_version ELSE nextval('registry_resource_version') END
	FROM newest s
	WHERE n.cluster_id = s.cluster_id AND n.name = s.node AND {{metrics_usage_due}}
	RETURNING n.resource_version
)
SELECT count(*), coalesce(max(resource_version), 0) FROM reported
