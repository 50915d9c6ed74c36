-- Upserts member $1's resource quotas from $2, a JSON array of quotaRow,
-- skipping rows whose values do not change, and returns the namespaces of
-- those that changed.
WITH i AS (
	SELECT * FROM jsonb_to_recordset($2::jsonb) AS i(namespace text, name text, hard jsonb, used jsonb)
), changed AS (
	INSERT INTO cluster_resource_quota AS c (cluster_id, namespace, name, hard, used)
	SELECT $1::text, i.namespace, i.name, i.hard, i.used FROM i
	ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET hard = EXCLUDED.hard, used = EXCLUDED.used
	WHERE (c.hard, c.used) IS DISTINCT FROM (EXCLUDED.hard, EXCLUDED.used)
	RETURNING c.namespace)
SELECT DISTINCT namespace FROM changed
