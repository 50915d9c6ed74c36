-- Deletes up to $3 of the oldest entries above $1 (the horizon) and below $2
-- (the stop), and returns how many and the highest deleted version.
WITH d AS (
	DELETE FROM registry_change WHERE resource_version IN (
		SELECT resource_version FROM registry_change
		WHERE resource_version > $1 AND resource_version < $2
		ORDER BY resource_version LIMIT $3)
	RETURNING resource_version)
SELECT count(*), coalesce(max(resource_version), 0) FROM d
