-- Deletes member $1's pods keyed in $2, a JSON array of {"namespace", "name"}
-- (keyRow), and returns each deleted pod's namespace and node ('' if none),
-- whose aggregates change.
DELETE FROM cluster_pod p USING jsonb_to_recordset($2::jsonb) AS k(namespace text, name text)
WHERE p.cluster_id = $1 AND p.namespace = k.namespace AND p.name = k.name
RETURNING p.namespace, coalesce(p.node_name, '')
