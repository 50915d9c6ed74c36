-- Creates the missing hourly history partitions covering [$1, $2]
-- (migration 004).
SELECT cluster_node_metrics_ensure_partitions($1, $2)
