-- Upserts member $1's namespace view rows from $2, a JSON array of
-- namespaceRow, and returns the highest resourceVersion it stamped (0 if
-- none). Rows whose values do not change are left alone: the input is
-- filtered against the current row first, so no sequence value is spent on a
-- no-op, and the ON CONFLICT update is guarded the same way.
WITH i AS (
	SELECT * FROM jsonb_to_recordset($2::jsonb)
		AS i(name text, uid text, labels jsonb, phase text, created_at timestamptz)
), changed AS (
	INSERT INTO cluster_namespace AS c (cluster_id, name, uid, labels, phase, created_at, resource_version)
	SELECT $1::text, i.name, i.uid, i.labels, i.phase, i.created_at, nextval('registry_resource_version')
	FROM i LEFT JOIN cluster_namespace cur ON cur.cluster_id = $1::text AND cur.name = i.name
	WHERE cur.name IS NULL
		OR (cur.uid, cur.labels, cur.phase, cur.created_at) IS DISTINCT FROM (i.uid, i.labels, i.phase, i.created_at)
	ON CONFLICT (cluster_id, name) DO UPDATE SET
		uid = EXCLUDED.uid, labels = EXCLUDED.labels, phase = EXCLUDED.phase,
		created_at = EXCLUDED.created_at, resource_version = EXCLUDED.resource_version
	WHERE (c.uid, c.labels, c.phase, c.created_at)
		IS DISTINCT FROM (EXCLUDED.uid, EXCLUDED.labels, EXCLUDED.phase, EXCLUDED.created_at)
	RETURNING c.resource_version)
SELECT coalesce(max(resource_version), 0) FROM changed
