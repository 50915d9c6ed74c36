-- Writes the node aggregates aggregates_nodes computed ($1) and stamps the
-- rows whose values change; $2 is the writer's start resourceVersion: a row
-- already stamped by this transaction (above it) keeps its version, so one
-- commit gives each row one version. Returns the highest version stamped (0
-- if none).
WITH v AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb)
		AS v(cluster_id text, name text, cpu bigint, mem bigint, pods bigint, other jsonb, total jsonb, allocated jsonb)
), changed AS (
	UPDATE cluster_node n SET
		requested_cpu_millis   = v.cpu,
		requested_memory_bytes = v.mem,
		pod_count              = v.pods,
		requested_other        = v.other,
		devices_total          = v.total,
		devices_allocated      = v.allocated,
		resource_version       = CASE WHEN n.resource_version > $2 THEN n.resource_version ELSE nextval('registry_resource_version') END
	FROM v
	WHERE n.cluster_id = v.cluster_id AND n.name = v.name
		AND (n.requested_cpu_millis, n.requested_memory_bytes, n.pod_count, n.requested_other, n.devices_total, n.devices_allocated)
		IS DISTINCT FROM (v.cpu, v.mem, v.pods, v.other, v.total, v.allocated)
	RETURNING n.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed
