-- Counts member $1's namespace samples in $2 that are due for a report
-- ($3 threshold, $4 period in seconds; namespace_usage_due), without the
-- writers' lock: a scrape with none due writes nothing.
WITH {{namespace_samples}}
SELECT count(*) FROM input s JOIN cluster_namespace n ON n.cluster_id = $1 AND n.name = s.namespace
WHERE {{namespace_usage_due}}
