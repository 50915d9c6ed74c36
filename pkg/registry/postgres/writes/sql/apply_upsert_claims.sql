-- Upserts member $1's ResourceClaims from $2, a JSON array of claimRow,
-- skipping rows whose values do not change, keeps cluster_claim_device to
-- their allocations, and returns the namespace ('' for none) and node (''
-- for none) of every change: each changed claim's namespace, and the node
-- of every device a changed claim gained or lost.
WITH i AS (
	SELECT namespace, name, uid, coalesce(classes, '{}') AS classes, coalesce(allocated, '[]') AS allocated
	FROM jsonb_to_recordset($2::jsonb) AS i(namespace text, name text, uid text, classes jsonb, allocated jsonb)
), changed AS (
	INSERT INTO cluster_resource_claim AS c (cluster_id, namespace, name, uid, classes, allocated)
	SELECT $1::text, i.namespace, i.name, i.uid, i.classes, i.allocated FROM i
	ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET
		uid = EXCLUDED.uid, classes = EXCLUDED.classes, allocated = EXCLUDED.allocated
	WHERE (c.uid, c.classes, c.allocated) IS DISTINCT FROM (EXCLUDED.uid, EXCLUDED.classes, EXCLUDED.allocated)
	RETURNING c.namespace, c.name, c.allocated
), wanted AS (
	SELECT DISTINCT changed.namespace, changed.name AS claim, r.driver, r.pool, r.device
	FROM changed CROSS JOIN LATERAL jsonb_to_recordset(changed.allocated) AS r(driver text, pool text, device text)
), lost AS (
	DELETE FROM cluster_claim_device d USING changed
	WHERE d.cluster_id = $1::text AND d.namespace = changed.namespace AND d.claim = changed.name
		AND NOT EXISTS (SELECT 1 FROM wanted w WHERE w.namespace = d.namespace AND w.claim = d.claim
			AND w.driver = d.driver AND w.pool = d.pool AND w.device = d.device)
	RETURNING d.driver, d.pool, d.device
), gained AS (
	INSERT INTO cluster_claim_device (cluster_id, driver, pool, device, namespace, claim)
	SELECT $1::text, w.driver, w.pool, w.device, w.namespace, w.claim FROM wanted w
	ON CONFLICT DO NOTHING
	RETURNING driver, pool, device
), moved AS (
	SELECT driver, pool, device FROM lost UNION SELECT driver, pool, device FROM gained
)
SELECT namespace, '' FROM changed
UNION SELECT '', s.node_name FROM moved JOIN cluster_resource_slice s
	ON s.cluster_id = $1::text AND s.driver = moved.driver AND s.pool = moved.pool AND moved.device = ANY(s.devices)
	WHERE s.node_name IS NOT NULL
