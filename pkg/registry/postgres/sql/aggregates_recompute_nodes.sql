-- Recomputes the requested resources (cpu, memory and requested_other) and
-- pod count of the nodes keyed in $1, a JSON array of {"cluster_id", "name"}
-- (pairRow), over their non-terminal pods, and stamps only the rows whose
-- values change; $2 is the writer's start resourceVersion: a row already
-- stamped by this transaction (above it) keeps its version, so one commit
-- gives each row one version. Returns the highest version stamped (0 if
-- none). Usage is not an aggregate: RecordNodeMetrics reports it.
WITH t AS (
	SELECT DISTINCT cluster_id, name FROM jsonb_to_recordset($1::jsonb) AS t(cluster_id text, name text)
), agg AS (
	SELECT t.cluster_id, t.name,
		coalesce(sum(p.cpu_request_millis), 0)::bigint   AS cpu,
		coalesce(sum(p.memory_request_bytes), 0)::bigint AS mem,
		count(p.name)::bigint                            AS pods,
		registry_jsonb_sum(p.requests_other)             AS other
	FROM t LEFT JOIN cluster_pod p
		ON p.cluster_id = t.cluster_id AND p.node_name = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
	GROUP BY t.cluster_id, t.name
), changed AS (
	UPDATE cluster_node n SET
		requested_cpu_millis   = agg.cpu,
		requested_memory_bytes = agg.mem,
		pod_count              = agg.pods,
		requested_other        = agg.other,
		resource_version       = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE nextval('registry_resource_version') END
	FROM agg
	WHERE n.cluster_id = agg.cluster_id AND n.name = agg.name
		AND (n.requested_cpu_millis, n.requested_memory_bytes, n.pod_count, n.requested_other)
		IS DISTINCT FROM (agg.cpu, agg.mem, agg.pods, agg.other)
	RETURNING n.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed
