-- As changefeed_window, counting only the entries of the kinds $3: the
-- window of the change-feed follower's read of the kinds it has watchers
-- of. The entries are walked in primary-key order from $1, so the read
-- costs the entries it passes, not the log's size.
SELECT s.resource_version, (SELECT compacted_rv FROM registry_change_horizon LIMIT 1), coalesce((
	SELECT max(w.resource_version) FROM (
		SELECT resource_version FROM registry_change
		WHERE resource_version > $1 AND resource_version <= s.resource_version AND kind = ANY($3::text[])
		ORDER BY resource_version LIMIT $2) w), 0),
	e.lost_after, e.floor
FROM (SELECT resource_version FROM registry_state LIMIT 1) s, (SELECT lost_after, floor FROM registry_epoch LIMIT 1) e
