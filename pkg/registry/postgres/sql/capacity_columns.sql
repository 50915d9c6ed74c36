-- Fragment: the columns a ClusterCapacity is read from, in
-- scanClusterCapacity's order (read_capacity.go); gets, lists and the change
-- feed select them.
cluster_id, labels,
	nodes, nodes_ready, nodes_schedulable, nodes_cordoned, nodes_tainted,
	all_allocatable_cpu_millis, all_allocatable_memory_bytes, all_allocatable_pods,
	all_requested_cpu_millis, all_requested_memory_bytes, all_requested_pods,
	all_usage_cpu_nanocores, all_usage_memory_bytes, all_usage_nodes,
	sched_allocatable_cpu_millis, sched_allocatable_memory_bytes, sched_allocatable_pods,
	sched_requested_cpu_millis, sched_requested_memory_bytes, sched_requested_pods,
	sched_usage_cpu_nanocores, sched_usage_memory_bytes, sched_usage_nodes,
	max_free_cpu_millis, max_free_memory_bytes, has_room, has_room_since, mirroring, mirroring_since,
	namespaces, pods, first_seen, resource_version, last_change_at
