-- Relist: keys of member $1's ResourceClaims not in $2, a JSON array of
-- {"namespace", "name"} (keyRow); an anti-join.
SELECT r.namespace, r.name FROM cluster_resource_claim r
WHERE r.cluster_id = $1 AND NOT EXISTS (
	SELECT 1 FROM jsonb_to_recordset($2::jsonb) AS k(namespace text, name text)
	WHERE k.namespace = r.namespace AND k.name = r.name)
