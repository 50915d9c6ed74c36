DROP INDEX cluster_node_unschedulable_idx;
DROP INDEX cluster_node_free_cpu_idx;
CREATE INDEX cluster_node_free_cpu_idx ON cluster_node (cluster_id, (allocatable_cpu_millis::numeric - requested_cpu_millis) DESC) WHERE schedulable;
