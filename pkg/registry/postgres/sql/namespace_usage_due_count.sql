-- Counts member $1's namespace samples in $2 that are due for a report
-- ($3 threshold, $4 period in seconds; namespace_usage_due) and its
-- namespaces whose usage is to become unknown ($5: namespace_usage_cut),
-- without the writers' lock: a scrape with none writes nothing.
WITH {{namespace_samples}}, {{namespace_usage_cut}}
SELECT (SELECT count(*) FROM input s JOIN cluster_namespace n ON n.cluster_id = $1 AND n.name = s.namespace
	WHERE {{namespace_usage_due}})
	+ (SELECT count(*) FROM cluster_namespace n WHERE {{namespace_usage_absent}})
