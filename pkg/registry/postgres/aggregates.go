package postgres

// Aggregates are materialized on the view rows so a list is a one-table
// scan. These statements recompute them for given (cluster, name) keys and
// stamp only the rows whose values change.

// recomputeNodesSQL sets requested resources and pod count of nodes $1/$2
// (parallel arrays); $3 is the writer's start resourceVersion. Usage is not
// an aggregate: RecordNodeMetrics reports it.
var recomputeNodesSQL = `
WITH t AS (
	SELECT DISTINCT cluster_id, name FROM unnest($1::text[], $2::text[]) AS t(cluster_id, name)
), agg AS (
	SELECT t.cluster_id, t.name,
		coalesce(sum(p.cpu_request_millis), 0)::bigint   AS cpu,
		coalesce(sum(p.memory_request_bytes), 0)::bigint AS mem,
		count(p.name)::bigint                            AS pods
	FROM t LEFT JOIN cluster_pod p
		ON p.cluster_id = t.cluster_id AND p.node_name = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
	GROUP BY t.cluster_id, t.name
), changed AS (
	UPDATE cluster_node n SET
		requested_cpu_millis   = agg.cpu,
		requested_memory_bytes = agg.mem,
		pod_count              = agg.pods,
		resource_version       = ` + nextRV("n", "$3") + `
	FROM agg
	WHERE n.cluster_id = agg.cluster_id AND n.name = agg.name
		AND (n.requested_cpu_millis, n.requested_memory_bytes, n.pod_count)
		IS DISTINCT FROM (agg.cpu, agg.mem, agg.pods)
	RETURNING n.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed`

// recomputeNamespacesSQL sets pod count, requests and quotas of namespaces
// $1/$2; $3 is the writer's start resourceVersion. Unscheduled pods count.
var recomputeNamespacesSQL = `
WITH t AS (
	SELECT DISTINCT cluster_id, name FROM unnest($1::text[], $2::text[]) AS t(cluster_id, name)
), pods AS (
	SELECT t.cluster_id, t.name,
		coalesce(sum(p.cpu_request_millis), 0)::bigint   AS cpu,
		coalesce(sum(p.memory_request_bytes), 0)::bigint AS mem,
		count(p.name)::bigint                            AS pods
	FROM t LEFT JOIN cluster_pod p
		ON p.cluster_id = t.cluster_id AND p.namespace = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
	GROUP BY t.cluster_id, t.name
), quotas AS (
	SELECT t.cluster_id, t.name,
		coalesce(jsonb_agg(jsonb_build_object('name', q.name, 'hard', q.hard, 'used', q.used) ORDER BY q.name)
			FILTER (WHERE q.name IS NOT NULL), '[]'::jsonb) AS quotas
	FROM t LEFT JOIN cluster_resource_quota q ON q.cluster_id = t.cluster_id AND q.namespace = t.name
	GROUP BY t.cluster_id, t.name
), changed AS (
	UPDATE cluster_namespace c SET
		pod_count            = pods.pods,
		cpu_request_millis   = pods.cpu,
		memory_request_bytes = pods.mem,
		quotas               = quotas.quotas,
		resource_version     = ` + nextRV("c", "$3") + `
	FROM pods JOIN quotas ON quotas.cluster_id = pods.cluster_id AND quotas.name = pods.name
	WHERE c.cluster_id = pods.cluster_id AND c.name = pods.name
		AND (c.pod_count, c.cpu_request_millis, c.memory_request_bytes, c.quotas)
		IS DISTINCT FROM (pods.pods, pods.cpu, pods.mem, quotas.quotas)
	RETURNING c.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed`

func (w *writer) recomputeNodes(keys pairs) error {
	if len(keys) == 0 {
		return nil
	}
	clusters, names := keys.arrays()
	return w.stamp("recompute node aggregates", recomputeNodesSQL, clusters, names, w.startRV)
}

func (w *writer) recomputeNamespaces(keys pairs) error {
	if len(keys) == 0 {
		return nil
	}
	clusters, names := keys.arrays()
	return w.stamp("recompute namespace aggregates", recomputeNamespacesSQL, clusters, names, w.startRV)
}
