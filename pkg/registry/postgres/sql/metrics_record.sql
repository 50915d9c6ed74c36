-- Stores the samples in $1 (JSON array of sampleRow) of known nodes in the
-- history and its hourly rollups, without the writers' lock (the history is no view: it has no
-- resourceVersion), and returns how many it stored and the keys of the nodes
-- whose usage is due for a report ($2 threshold, $3 period in seconds; see
-- metrics_usage_due) as two arrays.
WITH {{metrics_samples}}, stored AS (
	INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
	SELECT * FROM samples
	ON CONFLICT (cluster_id, node, observed_at) DO NOTHING
	RETURNING cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at
), {{metrics_rollup}}, due AS (
	SELECT s.cluster_id, s.node FROM newest s JOIN cluster_node n ON n.cluster_id = s.cluster_id AND n.name = s.node
	WHERE {{metrics_usage_due}}
)
SELECT (SELECT count(*) FROM stored),
	coalesce((SELECT array_agg(cluster_id) FROM due), '{}'), coalesce((SELECT array_agg(node) FROM due), '{}')
