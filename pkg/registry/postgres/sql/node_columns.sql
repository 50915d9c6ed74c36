-- Fragment: the columns a NodeCapacity is read from, in scanNodeCapacity's
-- order (read_nodes.go); gets, lists and the change feed select them.
cluster_id, name, uid, labels, created_at,
	capacity_cpu_millis, capacity_memory_bytes, capacity_pods,
	allocatable_cpu_millis, allocatable_memory_bytes, allocatable_pods,
	unschedulable, ready, conditions, taints, schedulable, unschedulable_reason,
	requested_cpu_millis, requested_memory_bytes, pod_count,
	usage_cpu_nanocores, usage_memory_bytes, usage_observed_at, usage_window_seconds,
	first_seen, resource_version
