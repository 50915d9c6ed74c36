-- Upserts member $1's node view rows from $2, a JSON array of nodeRow, and
-- returns the highest resourceVersion it stamped (0 if none). Rows whose
-- values do not change are left alone, as in apply_upsert_namespaces.
-- Aggregates and usage are not the batch's: apply recomputes the former,
-- RecordNodeMetrics reports the latter.
WITH i AS (
	SELECT * FROM jsonb_to_recordset($2::jsonb) AS i(
		name text, uid text, labels jsonb, created_at timestamptz,
		capacity_cpu_millis bigint, capacity_memory_bytes bigint, capacity_pods bigint,
		allocatable_cpu_millis bigint, allocatable_memory_bytes bigint, allocatable_pods bigint,
		unschedulable boolean, ready boolean, conditions jsonb, taints jsonb)
), changed AS (
	INSERT INTO cluster_node AS c (cluster_id, name, uid, labels, created_at,
		capacity_cpu_millis, capacity_memory_bytes, capacity_pods,
		allocatable_cpu_millis, allocatable_memory_bytes, allocatable_pods,
		unschedulable, ready, conditions, taints, resource_version)
	SELECT $1::text, i.name, i.uid, i.labels, i.created_at,
		i.capacity_cpu_millis, i.capacity_memory_bytes, i.capacity_pods,
		i.allocatable_cpu_millis, i.allocatable_memory_bytes, i.allocatable_pods,
		i.unschedulable, i.ready, i.conditions, i.taints, nextval('registry_resource_version')
	FROM i LEFT JOIN cluster_node cur ON cur.cluster_id = $1::text AND cur.name = i.name
	WHERE cur.name IS NULL
		OR (cur.uid, cur.labels, cur.created_at,
			cur.capacity_cpu_millis, cur.capacity_memory_bytes, cur.capacity_pods,
			cur.allocatable_cpu_millis, cur.allocatable_memory_bytes, cur.allocatable_pods,
			cur.unschedulable, cur.ready, cur.conditions, cur.taints)
		IS DISTINCT FROM (i.uid, i.labels, i.created_at,
			i.capacity_cpu_millis, i.capacity_memory_bytes, i.capacity_pods,
			i.allocatable_cpu_millis, i.allocatable_memory_bytes, i.allocatable_pods,
			i.unschedulable, i.ready, i.conditions, i.taints)
	ON CONFLICT (cluster_id, name) DO UPDATE SET
		uid = EXCLUDED.uid, labels = EXCLUDED.labels, created_at = EXCLUDED.created_at,
		capacity_cpu_millis = EXCLUDED.capacity_cpu_millis,
		capacity_memory_bytes = EXCLUDED.capacity_memory_bytes,
		capacity_pods = EXCLUDED.capacity_pods,
		allocatable_cpu_millis = EXCLUDED.allocatable_cpu_millis,
		allocatable_memory_bytes = EXCLUDED.allocatable_memory_bytes,
		allocatable_pods = EXCLUDED.allocatable_pods,
		unschedulable = EXCLUDED.unschedulable, ready = EXCLUDED.ready,
		conditions = EXCLUDED.conditions, taints = EXCLUDED.taints,
		resource_version = EXCLUDED.resource_version
	WHERE (c.uid, c.labels, c.created_at,
			c.capacity_cpu_millis, c.capacity_memory_bytes, c.capacity_pods,
			c.allocatable_cpu_millis, c.allocatable_memory_bytes, c.allocatable_pods,
			c.unschedulable, c.ready, c.conditions, c.taints)
		IS DISTINCT FROM (EXCLUDED.uid, EXCLUDED.labels, EXCLUDED.created_at,
			EXCLUDED.capacity_cpu_millis, EXCLUDED.capacity_memory_bytes, EXCLUDED.capacity_pods,
			EXCLUDED.allocatable_cpu_millis, EXCLUDED.allocatable_memory_bytes, EXCLUDED.allocatable_pods,
			EXCLUDED.unschedulable, EXCLUDED.ready, EXCLUDED.conditions, EXCLUDED.taints)
	RETURNING c.resource_version)
SELECT coalesce(max(resource_version), 0) FROM changed
