-- Fragment (a CTE list) of metrics_record: adds the samples just stored
-- ("stored") to the hourly rollups of their node and of their member (node
-- ''): counts, sums and maxima, and the histogram buckets (usage_bucket).
rolled AS (
		SELECT s.cluster_id, n.node, date_trunc('hour', s.observed_at, 'UTC') AS hour,
			s.cpu_usage_nanocores AS cpu, s.memory_usage_bytes AS memory
		FROM stored s, LATERAL (VALUES (s.node), ('')) n(node)
	), rolled_hourly AS (
		INSERT INTO cluster_node_usage_hourly AS h (cluster_id, node, hour, samples, cpu_sum, cpu_max, memory_sum, memory_max)
		SELECT cluster_id, node, hour, count(*), sum(cpu), max(cpu), sum(memory), max(memory)
		FROM rolled GROUP BY cluster_id, node, hour
		ON CONFLICT (cluster_id, node, hour) DO UPDATE SET
			samples = h.samples + EXCLUDED.samples,
			cpu_sum = h.cpu_sum + EXCLUDED.cpu_sum, cpu_max = greatest(h.cpu_max, EXCLUDED.cpu_max),
			memory_sum = h.memory_sum + EXCLUDED.memory_sum, memory_max = greatest(h.memory_max, EXCLUDED.memory_max)
	), rolled_buckets AS (
		INSERT INTO cluster_node_usage_buckets AS b (cluster_id, node, hour, resource, bucket, samples)
		SELECT cluster_id, node, hour, r.resource, usage_bucket(r.v), count(*)
		FROM rolled, LATERAL (VALUES ('c'::"char", cpu), ('m'::"char", memory)) r(resource, v)
		GROUP BY 1, 2, 3, 4, 5
		ON CONFLICT (cluster_id, node, hour, resource, bucket) DO UPDATE SET samples = b.samples + EXCLUDED.samples
	)
