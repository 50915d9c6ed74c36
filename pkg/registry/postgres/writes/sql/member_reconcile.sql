-- Records one replica's view of the members (store.MembersView): $2 listed
-- anew are removed no more, $1 listed are not absent, and $3 known but no
-- longer listed are absent from now unless they already were. Returns, for
-- each of $3, since when it is absent, whether it is removed, and whether
-- it is due for removal: absent for the grace $4 (seconds). Removal itself
-- is member_remove, under the member's lock.
WITH listed AS (
	UPDATE discovery_member SET removed_at = NULL, absent_since = NULL, updated_at = now()
	WHERE cluster_id = ANY($2::text[]) AND removed_at IS NOT NULL
), present AS (
	UPDATE discovery_member SET absent_since = NULL, updated_at = now()
	WHERE cluster_id = ANY($1::text[]) AND absent_since IS NOT NULL AND removed_at IS NULL
), absent AS (
	INSERT INTO discovery_member AS m (cluster_id, absent_since)
	SELECT DISTINCT id, now() FROM unnest($3::text[]) id
	ON CONFLICT (cluster_id) DO UPDATE SET absent_since = EXCLUDED.absent_since, updated_at = now()
	WHERE m.absent_since IS NULL AND m.removed_at IS NULL
	RETURNING m.cluster_id, m.absent_since, m.removed_at
), members AS (
	SELECT cluster_id, absent_since, removed_at FROM absent
	UNION ALL
	SELECT m.cluster_id, m.absent_since, m.removed_at FROM discovery_member m
	WHERE m.cluster_id = ANY($3::text[]) AND NOT EXISTS (SELECT 1 FROM absent a WHERE a.cluster_id = m.cluster_id)
)
SELECT cluster_id, absent_since, removed_at IS NOT NULL,
	removed_at IS NULL AND absent_since <= now() - make_interval(secs => $4::float8)
FROM members ORDER BY cluster_id
