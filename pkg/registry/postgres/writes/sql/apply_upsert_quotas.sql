-- Upserts member $1's resource quotas from $2, a JSON array of quotaRow,
-- skipping rows whose values do not change, and returns the namespaces of
-- those that changed. A row whose scopes are NULL (written before migration
-- 030) changes: its scopes are written.
WITH i AS (
	SELECT * FROM jsonb_to_recordset($2::jsonb) AS i(namespace text, name text, hard jsonb, used jsonb, scopes jsonb)
), changed AS (
	INSERT INTO cluster_resource_quota AS c (cluster_id, namespace, name, hard, used, scopes)
	SELECT $1::text, i.namespace, i.name, i.hard, i.used, i.scopes FROM i
	ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET hard = EXCLUDED.hard, used = EXCLUDED.used, scopes = EXCLUDED.scopes
	WHERE (c.hard, c.used, c.scopes) IS DISTINCT FROM (EXCLUDED.hard, EXCLUDED.used, EXCLUDED.scopes)
	RETURNING c.namespace)
SELECT DISTINCT namespace FROM changed
