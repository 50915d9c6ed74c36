-- Writes the node aggregates aggregates_nodes computed ($1) and stamps the
-- rows whose values change; $2 is the writer's start resourceVersion: a row
-- already stamped by this transaction (above it) keeps its version, so one
-- commit gives each row one version. Returns the highest version stamped (0
-- if none).
WITH v AS (
	SELECT * FROM jsonb_populate_recordset(NULL::cluster_node, $1::jsonb)
), changed AS (
	UPDATE cluster_node n SET
		requested_cpu_millis = v.requested_cpu_millis,
		requested_memory_bytes = v.requested_memory_bytes,
		pod_count = v.pod_count,
		requested_other = v.requested_other,
		devices_total = v.devices_total,
		devices_allocated = v.devices_allocated,
		resource_version = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE nextval('registry_resource_version') END
	FROM v
	WHERE n.cluster_id = v.cluster_id AND n.name = v.name
		AND (n.requested_cpu_millis, n.requested_memory_bytes, n.pod_count, n.requested_other, n.devices_total, n.devices_allocated)
		IS DISTINCT FROM (v.requested_cpu_millis, v.requested_memory_bytes, v.pod_count, v.requested_other, v.devices_total, v.devices_allocated)
	RETURNING n.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed
