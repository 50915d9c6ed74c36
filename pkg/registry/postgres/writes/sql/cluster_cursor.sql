-- Member $1's cursor for resource $2.
SELECT resource_version FROM discovery_cursor WHERE cluster_id = $1 AND resource = $2
