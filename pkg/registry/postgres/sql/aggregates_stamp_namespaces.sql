-- Writes the namespace aggregates aggregates_namespaces computed ($1) and
-- stamps the rows whose values change; $2 is the writer's start
-- resourceVersion, as in aggregates_stamp_nodes. Returns the highest version
-- stamped (0 if none).
WITH v AS (
	SELECT * FROM jsonb_populate_recordset(NULL::cluster_namespace, $1::jsonb)
), changed AS (
	UPDATE cluster_namespace c SET
		pod_count = v.pod_count,
		cpu_request_millis = v.cpu_request_millis,
		memory_request_bytes = v.memory_request_bytes,
		requested_other = v.requested_other,
		quotas = v.quotas,
		device_claims = v.device_claims,
		resource_version = CASE WHEN c.resource_version > $2 THEN c.resource_version ELSE nextval('registry_resource_version') END
	FROM v
	WHERE c.cluster_id = v.cluster_id AND c.name = v.name
		AND (c.pod_count, c.cpu_request_millis, c.memory_request_bytes, c.requested_other, c.quotas, c.device_claims)
		IS DISTINCT FROM (v.pod_count, v.cpu_request_millis, v.memory_request_bytes, v.requested_other, v.quotas, v.device_claims)
	RETURNING c.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed
