-- Fragment: the columns a ClusterNamespace is read from, in
-- scanClusterNamespace's order (read_namespaces.go); gets, lists and the
-- change feed select them.
cluster_id, name, uid, labels, phase, created_at,
	pod_count, cpu_request_millis, memory_request_bytes, quotas, first_seen, resource_version,
	usage_cpu_nanocores, usage_memory_bytes, usage_pods, usage_observed_at
