-- Deletes member $1's ResourceClaims keyed in $2, a JSON array of
-- {"namespace", "name"} (keyRow), with their allocated devices, and returns
-- the namespace ('' for none) and node ('' for none) of every change: each
-- deleted claim's namespace, and the node of each device it held.
WITH gone AS (
	DELETE FROM cluster_resource_claim c USING jsonb_to_recordset($2::jsonb) AS k(namespace text, name text)
	WHERE c.cluster_id = $1 AND c.namespace = k.namespace AND c.name = k.name
	RETURNING c.namespace, c.name
), freed AS (
	DELETE FROM cluster_claim_device d USING gone
	WHERE d.cluster_id = $1 AND d.namespace = gone.namespace AND d.claim = gone.name
	RETURNING d.driver, d.pool, d.device
)
SELECT namespace, '' FROM gone
UNION SELECT '', s.node_name FROM freed JOIN cluster_resource_slice s
	ON s.cluster_id = $1 AND s.driver = freed.driver AND s.pool = freed.pool AND freed.device = ANY(s.devices)
	WHERE s.node_name IS NOT NULL
