-- Fragment (a condition) of namespace_usage_due_names and
-- namespace_report_usage: true when member $1's namespace n shows a usage
-- no sample has confirmed since the cut (the CTE "cut": namespace_usage_cut
-- in namespace_usage_due_names, that statement's result passed as $5 in
-- namespace_report_usage): the scrape in "input" has none of it (it runs no
-- pod now) and its history none since. Such a usage becomes unknown. NOT
-- IN, a hashed subplan, as in metrics_usage_absent.
n.cluster_id = $1 AND n.usage_observed_at < (SELECT at FROM cut)
	AND n.name NOT IN (SELECT s.namespace FROM input s)
	AND NOT EXISTS (SELECT 1 FROM cluster_namespace_usage_hourly h
		WHERE h.cluster_id = n.cluster_id AND h.namespace = n.name
			AND h.hour >= date_trunc('hour', (SELECT at FROM cut), 'UTC') AND h.last_observed_at >= (SELECT at FROM cut))
