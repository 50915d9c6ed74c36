-- Fragment (a condition) of metrics_record and metrics_report_usage: true
-- when node n's newest sample s is to be reported: it is newer than the
-- reported one, and there is none, or usage moved by more than $2 (a
-- fraction) of allocatable, or, with a report period ($3 seconds; 0: none,
-- the default), s is in a later period than the reported one. Each node's
-- periods start at its own phase (cluster_node_usage_phase, a hash of its
-- key), so the refreshes spread evenly over the period instead of all
-- coming due in the same scrape. Without a period a quiet node's reported
-- sample stays: the member's heartbeat says how fresh it is.
s.observed_at > coalesce(n.usage_observed_at, '-infinity')
	AND (n.usage_observed_at IS NULL
		OR floor((extract(epoch FROM s.observed_at) + cluster_node_usage_phase(n.cluster_id, n.name, $3::float8)) / nullif($3::float8, 0))
			> floor((extract(epoch FROM n.usage_observed_at) + cluster_node_usage_phase(n.cluster_id, n.name, $3::float8)) / nullif($3::float8, 0))
		OR abs(s.cpu_usage_nanocores - n.usage_cpu_nanocores) > $2::float8 * n.allocatable_cpu_millis * 1000000
		OR abs(s.memory_usage_bytes - n.usage_memory_bytes) > $2::float8 * n.allocatable_memory_bytes)
