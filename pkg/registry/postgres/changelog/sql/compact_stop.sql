-- Where a compaction stops (exclusive): the first entry above the horizon
-- committed at or after $1, or else one past the registry version it started
-- at, so it ends under a steady stream of writes.
SELECT coalesce((
	SELECT c.resource_version FROM registry_change c
	WHERE c.resource_version > (SELECT compacted_rv FROM registry_change_horizon LIMIT 1) AND c.committed_at >= $1
	ORDER BY c.resource_version LIMIT 1), (SELECT resource_version FROM registry_state LIMIT 1) + 1)
