-- Upserts member $1's pods from $2, a JSON array of podRow (node_name '' for
-- an unscheduled pod), skipping rows whose values do not change, and returns
-- the namespace and node ('' if none) of every pod that changed, both its
-- old and its new node, whose aggregates change.
WITH i AS (
	SELECT namespace, name, uid, nullif(node_name, '') AS node_name, phase, cpu_request_millis, memory_request_bytes,
		coalesce(requests_other, '{}') AS requests_other
	FROM jsonb_to_recordset($2::jsonb) AS i(namespace text, name text, uid text, node_name text, phase text,
		cpu_request_millis bigint, memory_request_bytes bigint, requests_other jsonb)
), old AS (
	SELECT cur.namespace, cur.node_name
	FROM i JOIN cluster_pod cur ON cur.cluster_id = $1::text AND cur.namespace = i.namespace AND cur.name = i.name
	WHERE (cur.uid, cur.node_name, cur.phase, cur.cpu_request_millis, cur.memory_request_bytes, cur.requests_other)
		IS DISTINCT FROM (i.uid, i.node_name, i.phase, i.cpu_request_millis, i.memory_request_bytes, i.requests_other)
), changed AS (
	INSERT INTO cluster_pod AS c (cluster_id, namespace, name, uid, node_name, phase, cpu_request_millis, memory_request_bytes, requests_other)
	SELECT $1::text, i.namespace, i.name, i.uid, i.node_name, i.phase, i.cpu_request_millis, i.memory_request_bytes, i.requests_other FROM i
	ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET
		uid = EXCLUDED.uid, node_name = EXCLUDED.node_name, phase = EXCLUDED.phase,
		cpu_request_millis = EXCLUDED.cpu_request_millis, memory_request_bytes = EXCLUDED.memory_request_bytes,
		requests_other = EXCLUDED.requests_other
	WHERE (c.uid, c.node_name, c.phase, c.cpu_request_millis, c.memory_request_bytes, c.requests_other)
		IS DISTINCT FROM (EXCLUDED.uid, EXCLUDED.node_name, EXCLUDED.phase, EXCLUDED.cpu_request_millis, EXCLUDED.memory_request_bytes, EXCLUDED.requests_other)
	RETURNING c.namespace, c.node_name)
SELECT namespace, coalesce(node_name, '') FROM old
UNION SELECT namespace, coalesce(node_name, '') FROM changed
