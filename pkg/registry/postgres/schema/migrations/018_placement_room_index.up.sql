-- Placement (issue 23) reads a schedulable node's room from the free-CPU
-- index alone: the index also carries what a replica's CPU, memory and pod
-- count are checked against, so a report over a member's schedulable nodes
-- is an index-only scan of about a tenth of the heap's pages, and a CPU
-- request skips the nodes without that much CPU free. The nodes that are
-- not schedulable (not ready, cordoned, tainted), whose tolerations the
-- report checks row by row, are found through their own small index, by
-- reason: a report that tolerates nothing can take only the not-ready ones.
DROP INDEX cluster_node_free_cpu_idx;
CREATE INDEX cluster_node_free_cpu_idx ON cluster_node (cluster_id, (allocatable_cpu_millis::numeric - requested_cpu_millis) DESC)
    INCLUDE (allocatable_cpu_millis, requested_cpu_millis, allocatable_memory_bytes, requested_memory_bytes, allocatable_pods, pod_count)
    WHERE schedulable;
CREATE INDEX cluster_node_unschedulable_idx ON cluster_node (cluster_id, unschedulable_reason) WHERE NOT schedulable;
