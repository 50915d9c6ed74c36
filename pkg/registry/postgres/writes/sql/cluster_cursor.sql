-- Member $1's cursor for resource $2. None for resourcequotas while a quota
-- row of the member has no scopes recorded (NULL: mirrored by a release
-- before migration 030), so the member's quotas are relisted and their
-- scopes written once.
SELECT resource_version FROM discovery_cursor WHERE cluster_id = $1 AND resource = $2
	AND NOT ($2 = 'resourcequotas' AND EXISTS (SELECT 1 FROM cluster_resource_quota q WHERE q.cluster_id = $1 AND q.scopes IS NULL))
