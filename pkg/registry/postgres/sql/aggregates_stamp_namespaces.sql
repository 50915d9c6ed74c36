-- Writes the namespace aggregates aggregates_namespaces computed ($1) and
-- stamps the rows whose values change; $2 is the writer's start
-- resourceVersion, as in aggregates_stamp_nodes. Returns the highest version
-- stamped (0 if none).
WITH v AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb)
		AS v(cluster_id text, name text, pods bigint, cpu bigint, mem bigint, other jsonb, quotas jsonb, claims jsonb)
), changed AS (
	UPDATE cluster_namespace c SET
		pod_count            = v.pods,
		cpu_request_millis   = v.cpu,
		memory_request_bytes = v.mem,
		requested_other      = v.other,
		quotas               = v.quotas,
		device_claims        = v.claims,
		resource_version     = CASE WHEN c.resource_version > $2 THEN c.resource_version ELSE nextval('registry_resource_version') END
	FROM v
	WHERE c.cluster_id = v.cluster_id AND c.name = v.name
		AND (c.pod_count, c.cpu_request_millis, c.memory_request_bytes, c.requested_other, c.quotas, c.device_claims)
		IS DISTINCT FROM (v.pods, v.cpu, v.mem, v.other, v.quotas, v.claims)
	RETURNING c.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed
