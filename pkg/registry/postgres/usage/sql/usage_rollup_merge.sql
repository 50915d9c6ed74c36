-- Fragment (an UPDATE SET list) of the usage rollups' upserts
-- (metrics_rollup, namespace_rollup): adds the EXCLUDED row's samples,
-- sums, maxima and histograms (usage_histogram_add) to the hour's row h.
samples = h.samples + EXCLUDED.samples,
	cpu_sum = h.cpu_sum + EXCLUDED.cpu_sum, cpu_max = greatest(h.cpu_max, EXCLUDED.cpu_max),
	memory_sum = h.memory_sum + EXCLUDED.memory_sum, memory_max = greatest(h.memory_max, EXCLUDED.memory_max),
	(cpu_buckets, cpu_counts) = (SELECT * FROM usage_histogram_add(h.cpu_buckets, h.cpu_counts, EXCLUDED.cpu_buckets, EXCLUDED.cpu_counts)),
	(memory_buckets, memory_counts) = (SELECT * FROM usage_histogram_add(h.memory_buckets, h.memory_counts, EXCLUDED.memory_buckets, EXCLUDED.memory_counts))
