-- The history partitions whose hour ended at or before $1, oldest first.
SELECT name FROM cluster_node_metrics_partitions() WHERE upper_bound <= $1 ORDER BY upper_bound
