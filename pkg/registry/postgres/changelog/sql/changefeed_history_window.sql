-- As changefeed_window, counting only the entries of kind $3: the window of
-- a watch's history read of a kind (changefeed_member_window reads one
-- member's). The entries are walked in primary-key order from $1, so the
-- read costs the entries it passes, of every kind and member, not the log's
-- size.
SELECT s.resource_version, (SELECT compacted_rv FROM registry_change_horizon LIMIT 1), coalesce((
	SELECT max(w.resource_version) FROM (
		SELECT resource_version FROM registry_change
		WHERE resource_version > $1 AND resource_version <= s.resource_version
			AND kind = $3
		ORDER BY resource_version LIMIT $2) w), 0),
	e.lost_after, e.floor
FROM (SELECT resource_version FROM registry_state LIMIT 1) s, (SELECT lost_after, floor FROM registry_epoch LIMIT 1) e
