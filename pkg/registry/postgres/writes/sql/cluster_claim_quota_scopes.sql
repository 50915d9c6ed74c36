-- In a claim of member $1: drops its resourcequotas cursor while a quota row
-- of it has no scopes recorded (NULL: mirrored by a release before
-- migration 030, or by one beside it during a rolling upgrade), so the new
-- owner relists the member's quotas and writes their scopes (immutable in
-- Kubernetes: once is enough). Rows of other resources and other members
-- are untouched.
DELETE FROM discovery_cursor WHERE cluster_id = $1 AND resource = 'resourcequotas'
	AND EXISTS (SELECT 1 FROM cluster_resource_quota q WHERE q.cluster_id = $1 AND q.scopes IS NULL)
