-- The ids of members not removed with rows in any table but the metrics
-- history, which holds samples of known nodes only, stays after a removal,
-- and would cost a scan of a day of samples.
SELECT cluster_id FROM cluster_namespace
UNION SELECT cluster_id FROM cluster_node
UNION SELECT cluster_id FROM cluster_capacity
UNION SELECT cluster_id FROM cluster_pod
UNION SELECT cluster_id FROM cluster_resource_quota
UNION SELECT cluster_id FROM cluster_resource_slice
UNION SELECT cluster_id FROM cluster_resource_claim
UNION SELECT cluster_id FROM discovery_cursor
UNION SELECT cluster_id FROM discovery_member WHERE removed_at IS NULL
ORDER BY 1
