-- Fragment (a CTE list) of metrics_record: adds the samples just stored
-- ("stored") to the hourly rollups of their node and of their member (node
-- ''): counts, sums, maxima and histograms (usage_bucket), merged into the
-- hour's row (usage_histogram_add). The same rows migration 010 built from
-- the history it found. A node's hour with one sample in the scrape (the
-- usual case) is that sample's row as it is; the member's hours, and a
-- node's with several samples, are grouped.
rolled AS (
		SELECT s.cluster_id, s.node, date_trunc('hour', s.observed_at, 'UTC') AS hour,
			s.cpu_usage_nanocores AS cpu, s.memory_usage_bytes AS memory,
			count(*) OVER (PARTITION BY s.cluster_id, s.node, date_trunc('hour', s.observed_at, 'UTC')) AS in_hour
		FROM stored s
	), grouped AS (
		SELECT cluster_id, '' AS node, hour, cpu, memory FROM rolled
		UNION ALL
		SELECT cluster_id, node, hour, cpu, memory FROM rolled WHERE in_hour > 1
	), bucketed AS (
		SELECT cluster_id, node, hour, 'c'::"char" AS resource, usage_bucket(cpu) AS bucket, count(*) AS n FROM grouped GROUP BY 1, 2, 3, 5
		UNION ALL
		SELECT cluster_id, node, hour, 'm'::"char", usage_bucket(memory), count(*) FROM grouped GROUP BY 1, 2, 3, 5
	), histograms AS (
		SELECT cluster_id, node, hour,
			array_agg(bucket ORDER BY bucket) FILTER (WHERE resource = 'c') AS cpu_buckets,
			array_agg(n ORDER BY bucket) FILTER (WHERE resource = 'c') AS cpu_counts,
			array_agg(bucket ORDER BY bucket) FILTER (WHERE resource = 'm') AS memory_buckets,
			array_agg(n ORDER BY bucket) FILTER (WHERE resource = 'm') AS memory_counts
		FROM bucketed GROUP BY cluster_id, node, hour
	), rollup_rows AS (
		SELECT s.cluster_id, s.node, s.hour, s.samples, s.cpu_sum, s.cpu_max, s.memory_sum, s.memory_max,
			h.cpu_buckets, h.cpu_counts, h.memory_buckets, h.memory_counts
		FROM (SELECT cluster_id, node, hour, count(*) AS samples, sum(cpu) AS cpu_sum, max(cpu) AS cpu_max,
					 sum(memory) AS memory_sum, max(memory) AS memory_max
			  FROM grouped GROUP BY cluster_id, node, hour) s
		JOIN histograms h USING (cluster_id, node, hour)
		UNION ALL
		SELECT cluster_id, node, hour, 1, cpu, cpu, memory, memory,
			ARRAY[usage_bucket(cpu)], ARRAY[1::bigint], ARRAY[usage_bucket(memory)], ARRAY[1::bigint]
		FROM rolled WHERE in_hour = 1
	), rolled_up AS (
		INSERT INTO cluster_node_usage_hourly AS h SELECT * FROM rollup_rows
		ON CONFLICT (cluster_id, node, hour) DO UPDATE SET {{usage_rollup_merge}}
	)
