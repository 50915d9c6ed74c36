-- As changefeed_history_window, counting only the entries of kind $3 of
-- member $4: the window of a watch's history read filtered by member (a
-- cluster label). The entries are walked on registry_change_kind_cluster_idx
-- (migration 029) from $1, so the read costs that member's entries of the
-- kind, and a member the log holds none of one index probe: in a plan made
-- for the values, which the store asks for (changelog.planForValues); a
-- generic plan, made without them, may walk the primary key instead.
SELECT s.resource_version, (SELECT compacted_rv FROM registry_change_horizon LIMIT 1), coalesce((
	SELECT max(w.resource_version) FROM (
		SELECT resource_version FROM registry_change
		WHERE resource_version > $1 AND resource_version <= s.resource_version
			AND kind = $3 AND cluster_id = $4
		ORDER BY resource_version LIMIT $2) w), 0),
	e.lost_after, e.floor
FROM (SELECT resource_version FROM registry_state LIMIT 1) s, (SELECT lost_after, floor FROM registry_epoch LIMIT 1) e
