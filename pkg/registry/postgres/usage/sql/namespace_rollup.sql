-- Adds member $1's namespace samples in $2 to the hourly rollups of their
-- namespaces (migration 012), each sample once: one newer than the hour's
-- last_observed_at. Only namespaces the registry holds for the member get
-- history. Under the member's lock and fence, without a commit ticket:
-- the history has no resourceVersion.
WITH {{namespace_samples}}
INSERT INTO cluster_namespace_usage_hourly AS h
SELECT $1, s.namespace, date_trunc('hour', s.observed_at, 'UTC'), 1,
	s.cpu_usage_nanocores, s.cpu_usage_nanocores, s.memory_usage_bytes, s.memory_usage_bytes,
	ARRAY[usage_bucket(s.cpu_usage_nanocores)], ARRAY[1::bigint],
	ARRAY[usage_bucket(s.memory_usage_bytes)], ARRAY[1::bigint], s.observed_at
FROM input s JOIN cluster_namespace n ON n.cluster_id = $1 AND n.name = s.namespace
ON CONFLICT (cluster_id, namespace, hour) DO UPDATE SET {{usage_rollup_merge}},
	last_observed_at = EXCLUDED.last_observed_at
WHERE EXCLUDED.last_observed_at > h.last_observed_at
