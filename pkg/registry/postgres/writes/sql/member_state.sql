-- Records member $1's mirroring state $2, the time $3 of the last change
-- mirrored, the time $4 of its newest node metrics sample and the member
-- time $5 up to which the registry holds every change of it (each NULL:
-- none to report) on its ClusterCapacity, creating the row of a member that
-- has none yet; a row already in that state with those times or later ones
-- is left alone (no version is spent). Returns the version stamped
-- (0 if none).
WITH changed AS (
	INSERT INTO cluster_capacity AS c (cluster_id, mirroring, mirroring_since, last_change_at, usage_observed_at, complete_as_of, resource_version)
	SELECT $1::text, $2::text, now(), $3::timestamptz, $4::timestamptz, $5::timestamptz, registry_next_rv()
	WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity WHERE cluster_id = $1::text AND mirroring = $2::text
		AND ($3::timestamptz IS NULL OR last_change_at >= $3::timestamptz)
		AND ($4::timestamptz IS NULL OR usage_observed_at >= $4::timestamptz)
		AND ($5::timestamptz IS NULL OR complete_as_of >= $5::timestamptz))
	ON CONFLICT (cluster_id) DO UPDATE SET
		mirroring_since = CASE WHEN c.mirroring = EXCLUDED.mirroring THEN c.mirroring_since ELSE EXCLUDED.mirroring_since END,
		mirroring = EXCLUDED.mirroring,
		last_change_at = greatest(c.last_change_at, EXCLUDED.last_change_at),
		usage_observed_at = greatest(c.usage_observed_at, EXCLUDED.usage_observed_at),
		complete_as_of = greatest(c.complete_as_of, EXCLUDED.complete_as_of),
		resource_version = EXCLUDED.resource_version
	RETURNING c.resource_version)
SELECT coalesce(max(resource_version), 0) FROM changed
