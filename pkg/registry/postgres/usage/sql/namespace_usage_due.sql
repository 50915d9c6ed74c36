-- Fragment (a condition) of namespace_usage_due_names and
-- namespace_report_usage: true when namespace n's sample s is to be
-- reported: it is newer than the reported one, and none is reported, or
-- the number of pods measured changed, or, with a report period ($4
-- seconds; 0: none), it is in a later one (each namespace's periods start
-- at its own phase, as nodes'),
-- or CPU or memory moved by more than $3 (a fraction) of the larger of the
-- namespace's requests and its reported usage.
s.observed_at > coalesce(n.usage_observed_at, '-infinity')
	AND (n.usage_observed_at IS NULL
		OR s.pods <> n.usage_pods
		OR floor((extract(epoch FROM s.observed_at) + cluster_node_usage_phase(n.cluster_id, n.name, $4::float8)) / nullif($4::float8, 0))
			> floor((extract(epoch FROM n.usage_observed_at) + cluster_node_usage_phase(n.cluster_id, n.name, $4::float8)) / nullif($4::float8, 0))
		OR abs(s.cpu_usage_nanocores - n.usage_cpu_nanocores) > $3::float8 * greatest(n.cpu_request_millis * 1000000, n.usage_cpu_nanocores)
		OR abs(s.memory_usage_bytes - n.usage_memory_bytes) > $3::float8 * greatest(n.memory_request_bytes, n.usage_memory_bytes))
