-- Recomputes member $1's device counts on its ClusterCapacity from its
-- slices (each pool's newest generation) and claims, and merges $2, a
-- jsonb object of DRA resource states ("Served", "Absent", "Forbidden"), into
-- member_apis, creating the row of a member that has none yet; a row
-- whose values do not change is left alone. $3 is the writer's start
-- resourceVersion, as in aggregates_recompute_nodes. Returns the version
-- stamped (0 if none).
WITH dev AS (
	SELECT s.driver, s.node_name, EXISTS (
		SELECT 1 FROM cluster_claim_device a
		WHERE a.cluster_id = s.cluster_id AND a.driver = s.driver AND a.pool = s.pool AND a.device = x.device) AS allocated
	FROM registry_current_slices($1::text) s CROSS JOIN LATERAL unnest(s.devices) AS x(device)
), per AS (
	SELECT driver, count(*) AS total, count(*) FILTER (WHERE allocated) AS allocated, count(DISTINCT node_name) AS nodes
	FROM dev GROUP BY driver
), m AS (
	SELECT coalesce(jsonb_object_agg(driver, total), '{}') AS total,
		coalesce(jsonb_object_agg(driver, allocated), '{}') AS allocated,
		coalesce(jsonb_object_agg(driver, nodes) FILTER (WHERE nodes > 0), '{}') AS nodes
	FROM per
), changed AS (
	INSERT INTO cluster_capacity AS c (cluster_id, devices_total, devices_allocated, devices_nodes, member_apis, resource_version)
	SELECT $1::text, m.total, m.allocated, m.nodes, $2::jsonb, registry_next_rv() FROM m
	WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity c WHERE c.cluster_id = $1::text
		AND (c.devices_total, c.devices_allocated, c.devices_nodes, c.member_apis || $2::jsonb)
			= (m.total, m.allocated, m.nodes, c.member_apis))
	ON CONFLICT (cluster_id) DO UPDATE SET
		devices_total = EXCLUDED.devices_total, devices_allocated = EXCLUDED.devices_allocated,
		devices_nodes = EXCLUDED.devices_nodes, member_apis = c.member_apis || EXCLUDED.member_apis,
		resource_version = CASE WHEN c.resource_version > $3 THEN c.resource_version ELSE EXCLUDED.resource_version END
	RETURNING c.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed
