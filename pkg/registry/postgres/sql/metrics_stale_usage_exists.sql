-- Whether any node's or namespace's reported usage was observed before $1.
SELECT EXISTS (SELECT 1 FROM cluster_node WHERE usage_observed_at < $1)
	OR EXISTS (SELECT 1 FROM cluster_namespace WHERE usage_observed_at < $1)
