-- Fragment (a CTE list) of metrics_record and metrics_report_usage over the
-- samples in $1, a JSON array of sampleRow: "samples" keeps those of nodes
-- the registry knows (observed no earlier than the node's creation, so a
-- recreated node never takes its predecessor's usage), "newest" the newest
-- of them per node.
input AS (
		SELECT * FROM jsonb_to_recordset($1::jsonb)
			AS s(cluster_id text, node text, cpu_usage_nanocores bigint, memory_usage_bytes bigint,
				observed_at timestamptz, window_seconds float8)
	), samples AS (
		SELECT s.* FROM input s JOIN cluster_node n ON n.cluster_id = s.cluster_id AND n.name = s.node
		WHERE n.created_at IS NULL OR s.observed_at >= n.created_at
	), newest AS (
		SELECT DISTINCT ON (cluster_id, node) * FROM samples ORDER BY cluster_id, node, observed_at DESC
	)
