-- Records member $1's mirroring state $2 on its ClusterCapacity, creating
-- the row of a member that has none yet; a row already in that state is left
-- alone (no sequence value is spent). Returns the version stamped (0 if none).
WITH changed AS (
	INSERT INTO cluster_capacity AS c (cluster_id, mirroring, mirroring_since, resource_version)
	SELECT $1::text, $2::text, now(), nextval('registry_resource_version')
	WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity WHERE cluster_id = $1::text AND mirroring = $2::text)
	ON CONFLICT (cluster_id) DO UPDATE SET mirroring = EXCLUDED.mirroring,
		mirroring_since = EXCLUDED.mirroring_since, resource_version = EXCLUDED.resource_version
	RETURNING c.resource_version)
SELECT coalesce(max(resource_version), 0) FROM changed
