-- Deletes member $1's resource quotas keyed in $2, a JSON array of
-- {"namespace", "name"} (keyRow), and returns each one's namespace.
DELETE FROM cluster_resource_quota q USING jsonb_to_recordset($2::jsonb) AS k(namespace text, name text)
WHERE q.cluster_id = $1 AND q.namespace = k.namespace AND q.name = k.name
RETURNING q.namespace
