-- Back to migration 009's cluster_capacity_add_nodes, without other resources.
CREATE OR REPLACE FUNCTION cluster_capacity_add_nodes(added cluster_node[], removed cluster_node[]) RETURNS void LANGUAGE sql AS $$
    WITH r AS (
        SELECT 1 AS s, a.* FROM unnest(added) AS a
        UNION ALL
        SELECT -1, o.* FROM unnest(removed) AS o
    ), delta AS (
        SELECT cluster_id,
            sum(s * 1)::bigint AS nodes,
            sum(s * ready::int)::bigint AS nodes_ready,
            sum(s * schedulable::int)::bigint AS nodes_schedulable,
            sum(s * unschedulable::int)::bigint AS nodes_cordoned,
            sum(s * cluster_node_tainted(taints)::int)::bigint AS nodes_tainted,
            sum(s::numeric * allocatable_cpu_millis) AS all_allocatable_cpu_millis,
            sum(s::numeric * allocatable_memory_bytes) AS all_allocatable_memory_bytes,
            sum(s::numeric * allocatable_pods) AS all_allocatable_pods,
            sum(s::numeric * requested_cpu_millis) AS all_requested_cpu_millis,
            sum(s::numeric * requested_memory_bytes) AS all_requested_memory_bytes,
            sum(s::numeric * pod_count) AS all_requested_pods,
            sum(s::numeric * coalesce(usage_cpu_nanocores, 0)) AS all_usage_cpu_nanocores,
            sum(s::numeric * coalesce(usage_memory_bytes, 0)) AS all_usage_memory_bytes,
            sum(s * (usage_cpu_nanocores IS NOT NULL)::int)::bigint AS all_usage_nodes,
            sum(s::numeric * schedulable::int * allocatable_cpu_millis) AS sched_allocatable_cpu_millis,
            sum(s::numeric * schedulable::int * allocatable_memory_bytes) AS sched_allocatable_memory_bytes,
            sum(s::numeric * schedulable::int * allocatable_pods) AS sched_allocatable_pods,
            sum(s::numeric * schedulable::int * requested_cpu_millis) AS sched_requested_cpu_millis,
            sum(s::numeric * schedulable::int * requested_memory_bytes) AS sched_requested_memory_bytes,
            sum(s::numeric * schedulable::int * pod_count) AS sched_requested_pods,
            sum(s::numeric * schedulable::int * coalesce(usage_cpu_nanocores, 0)) AS sched_usage_cpu_nanocores,
            sum(s::numeric * schedulable::int * coalesce(usage_memory_bytes, 0)) AS sched_usage_memory_bytes,
            sum(s * schedulable::int * (usage_cpu_nanocores IS NOT NULL)::int)::bigint AS sched_usage_nodes
        FROM r GROUP BY cluster_id
    ), d AS (
        SELECT delta.*,
            (SELECT n.allocatable_cpu_millis::numeric - n.requested_cpu_millis FROM cluster_node n
             WHERE n.cluster_id = delta.cluster_id AND n.schedulable
             ORDER BY n.allocatable_cpu_millis::numeric - n.requested_cpu_millis DESC LIMIT 1) AS max_free_cpu_millis,
            (SELECT n.allocatable_memory_bytes::numeric - n.requested_memory_bytes FROM cluster_node n
             WHERE n.cluster_id = delta.cluster_id AND n.schedulable
             ORDER BY n.allocatable_memory_bytes::numeric - n.requested_memory_bytes DESC LIMIT 1) AS max_free_memory_bytes
        FROM delta
    ), updated AS (
        UPDATE cluster_capacity c SET
            nodes = c.nodes + d.nodes,
            nodes_ready = c.nodes_ready + d.nodes_ready,
            nodes_schedulable = c.nodes_schedulable + d.nodes_schedulable,
            nodes_cordoned = c.nodes_cordoned + d.nodes_cordoned,
            nodes_tainted = c.nodes_tainted + d.nodes_tainted,
            all_allocatable_cpu_millis = c.all_allocatable_cpu_millis + d.all_allocatable_cpu_millis,
            all_allocatable_memory_bytes = c.all_allocatable_memory_bytes + d.all_allocatable_memory_bytes,
            all_allocatable_pods = c.all_allocatable_pods + d.all_allocatable_pods,
            all_requested_cpu_millis = c.all_requested_cpu_millis + d.all_requested_cpu_millis,
            all_requested_memory_bytes = c.all_requested_memory_bytes + d.all_requested_memory_bytes,
            all_requested_pods = c.all_requested_pods + d.all_requested_pods,
            all_usage_cpu_nanocores = c.all_usage_cpu_nanocores + d.all_usage_cpu_nanocores,
            all_usage_memory_bytes = c.all_usage_memory_bytes + d.all_usage_memory_bytes,
            all_usage_nodes = c.all_usage_nodes + d.all_usage_nodes,
            sched_allocatable_cpu_millis = c.sched_allocatable_cpu_millis + d.sched_allocatable_cpu_millis,
            sched_allocatable_memory_bytes = c.sched_allocatable_memory_bytes + d.sched_allocatable_memory_bytes,
            sched_allocatable_pods = c.sched_allocatable_pods + d.sched_allocatable_pods,
            sched_requested_cpu_millis = c.sched_requested_cpu_millis + d.sched_requested_cpu_millis,
            sched_requested_memory_bytes = c.sched_requested_memory_bytes + d.sched_requested_memory_bytes,
            sched_requested_pods = c.sched_requested_pods + d.sched_requested_pods,
            sched_usage_cpu_nanocores = c.sched_usage_cpu_nanocores + d.sched_usage_cpu_nanocores,
            sched_usage_memory_bytes = c.sched_usage_memory_bytes + d.sched_usage_memory_bytes,
            sched_usage_nodes = c.sched_usage_nodes + d.sched_usage_nodes,
            max_free_cpu_millis = d.max_free_cpu_millis,
            max_free_memory_bytes = d.max_free_memory_bytes,
            has_room = cluster_capacity_room(d.max_free_cpu_millis, d.max_free_memory_bytes),
            has_room_since = CASE WHEN c.has_room = cluster_capacity_room(d.max_free_cpu_millis, d.max_free_memory_bytes)
                THEN c.has_room_since ELSE now() END,
            resource_version = nextval('registry_resource_version')
        FROM d
        WHERE c.cluster_id = d.cluster_id
            AND ((d.nodes, d.nodes_ready, d.nodes_schedulable, d.nodes_cordoned, d.nodes_tainted, d.all_allocatable_cpu_millis, d.all_allocatable_memory_bytes, d.all_allocatable_pods, d.all_requested_cpu_millis, d.all_requested_memory_bytes, d.all_requested_pods, d.all_usage_cpu_nanocores, d.all_usage_memory_bytes, d.all_usage_nodes, d.sched_allocatable_cpu_millis, d.sched_allocatable_memory_bytes, d.sched_allocatable_pods, d.sched_requested_cpu_millis, d.sched_requested_memory_bytes, d.sched_requested_pods, d.sched_usage_cpu_nanocores, d.sched_usage_memory_bytes, d.sched_usage_nodes)
                IS DISTINCT FROM (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            OR (c.max_free_cpu_millis, c.max_free_memory_bytes) IS DISTINCT FROM (d.max_free_cpu_millis, d.max_free_memory_bytes))
        RETURNING 1
    )
    INSERT INTO cluster_capacity (cluster_id, nodes, nodes_ready, nodes_schedulable, nodes_cordoned, nodes_tainted, all_allocatable_cpu_millis, all_allocatable_memory_bytes, all_allocatable_pods, all_requested_cpu_millis, all_requested_memory_bytes, all_requested_pods, all_usage_cpu_nanocores, all_usage_memory_bytes, all_usage_nodes, sched_allocatable_cpu_millis, sched_allocatable_memory_bytes, sched_allocatable_pods, sched_requested_cpu_millis, sched_requested_memory_bytes, sched_requested_pods, sched_usage_cpu_nanocores, sched_usage_memory_bytes, sched_usage_nodes,
        max_free_cpu_millis, max_free_memory_bytes, has_room, resource_version)
    SELECT d.cluster_id, d.nodes, d.nodes_ready, d.nodes_schedulable, d.nodes_cordoned, d.nodes_tainted, d.all_allocatable_cpu_millis, d.all_allocatable_memory_bytes, d.all_allocatable_pods, d.all_requested_cpu_millis, d.all_requested_memory_bytes, d.all_requested_pods, d.all_usage_cpu_nanocores, d.all_usage_memory_bytes, d.all_usage_nodes, d.sched_allocatable_cpu_millis, d.sched_allocatable_memory_bytes, d.sched_allocatable_pods, d.sched_requested_cpu_millis, d.sched_requested_memory_bytes, d.sched_requested_pods, d.sched_usage_cpu_nanocores, d.sched_usage_memory_bytes, d.sched_usage_nodes,
        d.max_free_cpu_millis, d.max_free_memory_bytes, cluster_capacity_room(d.max_free_cpu_millis, d.max_free_memory_bytes),
        nextval('registry_resource_version')
    FROM d WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity c WHERE c.cluster_id = d.cluster_id)
        AND d.cluster_id IN (SELECT cluster_id FROM unnest(added))
$$;
DROP AGGREGATE registry_jsonb_sum(jsonb);
DROP FUNCTION registry_jsonb_sum_step(jsonb, jsonb);
DROP FUNCTION registry_jsonb_add(jsonb, jsonb);
ALTER TABLE cluster_capacity
    DROP COLUMN all_allocatable_other, DROP COLUMN all_requested_other, DROP COLUMN sched_allocatable_other,
    DROP COLUMN sched_requested_other, DROP COLUMN nodes_with, DROP COLUMN max_free_other;
ALTER TABLE cluster_namespace DROP COLUMN requested_other;
ALTER TABLE cluster_pod DROP COLUMN requests_other;
ALTER TABLE cluster_node DROP COLUMN capacity_other, DROP COLUMN allocatable_other, DROP COLUMN requested_other;
