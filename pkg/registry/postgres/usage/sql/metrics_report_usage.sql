-- Reports the due samples among $1 (JSON array of sampleRow) on the view
-- rows, re-checking the rule ($2 threshold, $3 period in seconds), and
-- makes the usage of member $4's nodes named in $7 unknown, re-checking
-- metrics_usage_absent ($5); $6 is the writer's start resourceVersion (a
-- row stamped by this transaction keeps its version). Returns how many rows
-- it stamped and the highest version.
WITH {{metrics_samples}}, reported AS (
	UPDATE cluster_node n SET
		usage_cpu_nanocores  = s.cpu_usage_nanocores,
		usage_memory_bytes   = s.memory_usage_bytes,
		usage_observed_at    = s.observed_at,
		usage_window_seconds = s.window_seconds,
		resource_version     = CASE WHEN n.resource_version > $6 THEN n.resource_version ELSE registry_next_rv() END
	FROM newest s
	WHERE n.cluster_id = s.cluster_id AND n.name = s.node AND {{metrics_usage_due}}
	RETURNING n.resource_version
), unknown AS (
	UPDATE cluster_node n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
		usage_observed_at = NULL, usage_window_seconds = NULL,
		resource_version = CASE WHEN n.resource_version > $6 THEN n.resource_version ELSE registry_next_rv() END
	WHERE n.name = ANY($7::text[]) AND {{metrics_usage_absent}}
	RETURNING n.resource_version
), stamped AS (
	SELECT resource_version FROM reported UNION ALL SELECT resource_version FROM unknown
)
SELECT count(*), coalesce(max(resource_version), 0) FROM stamped
