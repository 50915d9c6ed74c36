-- Removes member $1 if it is still absent for the grace $2 (seconds) and
-- not removed: records the removal and renews its epoch, which fences out
-- its owner. Its identity goes with its cursors: whatever cluster the id
-- names when it is listed again starts afresh. Returns a row if it did.
UPDATE discovery_member SET removed_at = now(), absent_since = NULL, epoch = nextval('discovery_member_epoch'),
	owner = NULL, identity = NULL, updated_at = now()
WHERE cluster_id = $1 AND removed_at IS NULL AND absent_since <= now() - make_interval(secs => $2::float8)
RETURNING cluster_id
