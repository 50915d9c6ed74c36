-- Names, without a commit ticket, member $1's namespaces whose samples in
-- $2 are due for a report ($3 threshold, $4 period in seconds;
-- namespace_usage_due) and those whose usage is to become unknown
-- (namespace_usage_absent), and returns the cut it used ($5:
-- namespace_usage_cut): namespace_report_usage re-checks only those, a
-- scrape with none writes nothing.
WITH {{namespace_samples}}, {{namespace_usage_cut}}
SELECT (SELECT at FROM cut),
	ARRAY(SELECT s.namespace FROM input s JOIN cluster_namespace n ON n.cluster_id = $1 AND n.name = s.namespace
		WHERE {{namespace_usage_due}}),
	ARRAY(SELECT n.name FROM cluster_namespace n WHERE {{namespace_usage_absent}})
