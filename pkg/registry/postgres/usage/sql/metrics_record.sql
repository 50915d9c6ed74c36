-- Stores the samples in $1 (JSON array of sampleRow, one scrape of member
-- $4) of known nodes in the history and its hourly rollups, without the
-- commit ticket (the history is no view: it has no resourceVersion), and
-- returns how many it stored, the keys of the nodes whose usage is due for
-- a report ($2 threshold, $3 period in seconds; see metrics_usage_due) as
-- two arrays, and the names of the member's nodes whose usage is to become
-- unknown (metrics_usage_absent, $5).
WITH {{metrics_samples}}, stored AS (
	INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
	SELECT * FROM samples
	ON CONFLICT (cluster_id, node, observed_at) DO NOTHING
	RETURNING cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at
), {{metrics_rollup}}, due AS (
	SELECT s.cluster_id, s.node FROM newest s JOIN cluster_node n ON n.cluster_id = s.cluster_id AND n.name = s.node
	WHERE {{metrics_usage_due}}
), absent AS (
	SELECT n.name FROM cluster_node n WHERE {{metrics_usage_absent}}
)
SELECT (SELECT count(*) FROM stored),
	coalesce((SELECT array_agg(cluster_id) FROM due), '{}'), coalesce((SELECT array_agg(node) FROM due), '{}'),
	coalesce((SELECT array_agg(name) FROM absent), '{}')
