-- One snapshot's registry resourceVersion (readAt), the horizon, and the
-- version of the last of the first $2 entries after $1 up to readAt (0 if
-- none). LIMIT 1 on the one-row tables keeps the planner's row estimate (and
-- so its cost, which decides JIT compilation) honest before ANALYZE.
SELECT s.resource_version, (SELECT compacted_rv FROM registry_change_horizon LIMIT 1), coalesce((
	SELECT max(w.resource_version) FROM (
		SELECT resource_version FROM registry_change
		WHERE resource_version > $1 AND resource_version <= s.resource_version
		ORDER BY resource_version LIMIT $2) w), 0),
	e.lost_after, e.floor
FROM (SELECT resource_version FROM registry_state LIMIT 1) s, (SELECT lost_after, floor FROM registry_epoch LIMIT 1) e
