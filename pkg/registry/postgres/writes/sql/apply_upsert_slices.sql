-- Upserts member $1's ResourceSlices from $2, a JSON array of sliceRow
-- (node_name '' for devices not local to one node), skipping rows whose
-- values do not change, and returns the nodes whose device counts change:
-- the old and new node of every changed slice, and every node with a slice
-- of a changed pool (a new generation makes the older ones stop counting).
WITH i AS (
	SELECT name, nullif(node_name, '') AS node_name, driver, pool, pool_generation, coalesce(devices, '{}') AS devices
	FROM jsonb_to_recordset($2::jsonb) AS i(name text, node_name text, driver text, pool text, pool_generation bigint, devices text[])
), old AS (
	SELECT cur.node_name, cur.driver, cur.pool
	FROM i JOIN cluster_resource_slice cur ON cur.cluster_id = $1::text AND cur.name = i.name
	WHERE (cur.node_name, cur.driver, cur.pool, cur.pool_generation, cur.devices)
		IS DISTINCT FROM (i.node_name, i.driver, i.pool, i.pool_generation, i.devices)
), changed AS (
	INSERT INTO cluster_resource_slice AS c (cluster_id, name, node_name, driver, pool, pool_generation, devices)
	SELECT $1::text, i.name, i.node_name, i.driver, i.pool, i.pool_generation, i.devices FROM i
	ON CONFLICT (cluster_id, name) DO UPDATE SET
		node_name = EXCLUDED.node_name, driver = EXCLUDED.driver, pool = EXCLUDED.pool,
		pool_generation = EXCLUDED.pool_generation, devices = EXCLUDED.devices
	WHERE (c.node_name, c.driver, c.pool, c.pool_generation, c.devices)
		IS DISTINCT FROM (EXCLUDED.node_name, EXCLUDED.driver, EXCLUDED.pool, EXCLUDED.pool_generation, EXCLUDED.devices)
	RETURNING c.node_name, c.driver, c.pool
), pools AS (
	SELECT driver, pool FROM old UNION SELECT driver, pool FROM changed
)
SELECT node_name FROM old WHERE node_name IS NOT NULL
UNION SELECT node_name FROM changed WHERE node_name IS NOT NULL
UNION SELECT s.node_name FROM pools JOIN cluster_resource_slice s
	ON s.cluster_id = $1::text AND s.driver = pools.driver AND s.pool = pools.pool
	WHERE s.node_name IS NOT NULL
