-- Fragment (a condition) of metrics_record and metrics_report_usage: true
-- when node n of member $4 shows a usage that no sample has confirmed
-- since $5 (the scrape's newest sample less the unknown-after age, both on
-- the member's clock): the scrape in "input" has no sample of it and the
-- history none since $5. Such a usage becomes unknown. NOT IN, planned as
-- one hashed subplan of the scrape: as a NOT EXISTS it was a nested loop
-- over the scrape per node (estimated at 100 samples), and once a quiet
-- member's usage is older than the cut every scrape compared all its nodes
-- with all its samples (1.1 s for 5,000). Samples name their node.
n.cluster_id = $4::text AND n.usage_observed_at < $5::timestamptz
	AND n.name NOT IN (SELECT s.node FROM input s WHERE s.cluster_id = $4::text)
	AND NOT EXISTS (SELECT 1 FROM cluster_node_metrics m
		WHERE m.cluster_id = n.cluster_id AND m.node = n.name AND m.observed_at >= $5::timestamptz)
