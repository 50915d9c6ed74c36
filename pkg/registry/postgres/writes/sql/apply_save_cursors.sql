-- Saves member $1's cursors: $2 is a JSON array of {"resource",
-- "resource_version"} (cursorRow).
INSERT INTO discovery_cursor (cluster_id, resource, resource_version, updated_at)
SELECT $1::text, t.resource, t.resource_version, now()
FROM jsonb_to_recordset($2::jsonb) AS t(resource text, resource_version text)
ON CONFLICT (cluster_id, resource) DO UPDATE
SET resource_version = EXCLUDED.resource_version, updated_at = EXCLUDED.updated_at
