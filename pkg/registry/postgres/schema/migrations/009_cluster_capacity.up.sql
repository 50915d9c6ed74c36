-- ClusterCapacity: one row per member cluster summing its nodes (all, and
-- the schedulable ones) and namespaces, kept current by statement triggers
-- on cluster_node and cluster_namespace in the transaction that changes
-- them, from the transition tables' deltas (no rescan of a member's nodes),
-- and change-logged like the other view rows (docs/clustercapacity.md).
--
-- A row takes a new resource_version each time a statement changes its
-- values, even if this transaction stamped it already: the triggers run
-- after the node statement whose rows they sum, so the row's version is
-- above every node version of the transaction that it reflects, and a
-- watcher that has seen a ClusterCapacity at version V has seen the
-- NodeCapacities it sums. The change log folds the restamps into one entry.

-- A NoSchedule or NoExecute taint, as cluster_node.schedulable counts them.
CREATE FUNCTION cluster_node_tainted(taints jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_path_exists(taints, '$[*] ? (@.effect == "NoSchedule" || @.effect == "NoExecute")')
$$;

CREATE TABLE cluster_capacity (
    cluster_id                  text COLLATE "C" PRIMARY KEY,
    -- the change log's row key is (cluster_id, name); the object is named after the cluster
    name                        text COLLATE "C" NOT NULL GENERATED ALWAYS AS (cluster_id) STORED,
    -- labels the member is registered with; members have none yet (selectors need the column)
    labels                      jsonb       NOT NULL DEFAULT '{}',
    nodes                       bigint      NOT NULL DEFAULT 0,
    nodes_ready                 bigint      NOT NULL DEFAULT 0,
    nodes_schedulable           bigint      NOT NULL DEFAULT 0,
    nodes_cordoned              bigint      NOT NULL DEFAULT 0,
    nodes_tainted               bigint      NOT NULL DEFAULT 0,
    all_allocatable_cpu_millis  numeric     NOT NULL DEFAULT 0,
    all_allocatable_memory_bytes numeric     NOT NULL DEFAULT 0,
    all_allocatable_pods        numeric     NOT NULL DEFAULT 0,
    all_requested_cpu_millis    numeric     NOT NULL DEFAULT 0,
    all_requested_memory_bytes  numeric     NOT NULL DEFAULT 0,
    all_requested_pods          numeric     NOT NULL DEFAULT 0,
    all_usage_cpu_nanocores     numeric     NOT NULL DEFAULT 0,
    all_usage_memory_bytes      numeric     NOT NULL DEFAULT 0,
    all_usage_nodes             bigint      NOT NULL DEFAULT 0,
    sched_allocatable_cpu_millis numeric     NOT NULL DEFAULT 0,
    sched_allocatable_memory_bytes numeric     NOT NULL DEFAULT 0,
    sched_allocatable_pods      numeric     NOT NULL DEFAULT 0,
    sched_requested_cpu_millis  numeric     NOT NULL DEFAULT 0,
    sched_requested_memory_bytes numeric     NOT NULL DEFAULT 0,
    sched_requested_pods        numeric     NOT NULL DEFAULT 0,
    sched_usage_cpu_nanocores   numeric     NOT NULL DEFAULT 0,
    sched_usage_memory_bytes    numeric     NOT NULL DEFAULT 0,
    sched_usage_nodes           bigint      NOT NULL DEFAULT 0,
    -- Sums of quantities are numeric: the registry stores any int64 quantity,
    -- and a sum of several may exceed int64 (the store saturates on reading).
    -- over cluster_namespace: namespaces and their non-terminal pods (scheduled or not)
    namespaces                  bigint      NOT NULL DEFAULT 0,
    pods                        bigint      NOT NULL DEFAULT 0,
    -- the most allocatable minus requested on one schedulable node; NULL without one
    max_free_cpu_millis         numeric,
    max_free_memory_bytes       numeric,
    -- the member's mirroring state as its discovery writer reports it ('' before
    -- the first report), and since when (RecordMemberState)
    mirroring                   text COLLATE "C" NOT NULL DEFAULT '',
    mirroring_since             timestamptz,
    -- some schedulable node has CPU and memory left, and since when that holds or not
    has_room                    boolean     NOT NULL DEFAULT false,
    has_room_since              timestamptz NOT NULL DEFAULT now(),
    first_seen                  timestamptz NOT NULL DEFAULT now(),
    resource_version            bigint      NOT NULL
);

-- The largest free CPU and memory of a member's schedulable nodes: the first
-- entry of these, recomputed only for members whose nodes a statement changed.
CREATE INDEX cluster_node_free_cpu_idx ON cluster_node (cluster_id, (allocatable_cpu_millis::numeric - requested_cpu_millis) DESC) WHERE schedulable;
CREATE INDEX cluster_node_free_memory_idx ON cluster_node (cluster_id, (allocatable_memory_bytes::numeric - requested_memory_bytes) DESC) WHERE schedulable;

ALTER TABLE registry_change DROP CONSTRAINT registry_change_kind_check,
    ADD CONSTRAINT registry_change_kind_check CHECK (kind IN ('NodeCapacity', 'ClusterNamespace', 'ClusterCapacity'));

CREATE TRIGGER cluster_capacity_log_insert AFTER INSERT ON cluster_capacity
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_insert('ClusterCapacity');
CREATE TRIGGER cluster_capacity_log_update AFTER UPDATE ON cluster_capacity
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_update('ClusterCapacity');
CREATE TRIGGER cluster_capacity_log_delete AFTER DELETE ON cluster_capacity
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registry_log_delete('ClusterCapacity');

-- cluster_capacity_room says whether a member has room for a pod.
CREATE FUNCTION cluster_capacity_room(free_cpu numeric, free_memory numeric) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(free_cpu > 0 AND free_memory > 0, false)
$$;

-- cluster_capacity_add_nodes adds the node rows in added and subtracts those
-- in removed (a statement's transition tables) from their members' rows,
-- re-reads the largest free CPU and memory of those members from the
-- indexes above, and stamps only rows whose values change. A member gets a
-- row when a node or namespace of it is added; removals alone never create
-- one, so DeleteCluster deletes the row first and its tombstone is the state
-- watchers knew.
CREATE FUNCTION cluster_capacity_add_nodes(added cluster_node[], removed cluster_node[]) RETURNS void LANGUAGE sql AS $$
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

-- cluster_capacity_add_namespaces does the same for namespace rows.
CREATE FUNCTION cluster_capacity_add_namespaces(added cluster_namespace[], removed cluster_namespace[]) RETURNS void LANGUAGE sql AS $$
    WITH r AS (
        SELECT 1 AS s, a.* FROM unnest(added) AS a
        UNION ALL
        SELECT -1, o.* FROM unnest(removed) AS o
    ), d AS (
        SELECT cluster_id, sum(s)::bigint AS namespaces, sum(s * pod_count)::bigint AS pods
        FROM r GROUP BY cluster_id
    ), updated AS (
        UPDATE cluster_capacity c SET namespaces = c.namespaces + d.namespaces, pods = c.pods + d.pods,
            resource_version = nextval('registry_resource_version')
        FROM d
        WHERE c.cluster_id = d.cluster_id AND (d.namespaces, d.pods) IS DISTINCT FROM (0, 0)
        RETURNING 1
    )
    INSERT INTO cluster_capacity (cluster_id, namespaces, pods, resource_version)
    SELECT d.cluster_id, d.namespaces, d.pods, nextval('registry_resource_version')
    FROM d WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity c WHERE c.cluster_id = d.cluster_id)
        AND d.cluster_id IN (SELECT cluster_id FROM unnest(added))
$$;

-- The triggers hand a statement's transition tables to the functions above.
-- PostgreSQL fires a table's triggers in name order: *_sum_* after *_log_*,
-- so the versions a deletion's tombstones take come before the capacity's.
CREATE FUNCTION cluster_capacity_node_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_nodes(ARRAY(SELECT n::cluster_node FROM new_rows n), '{}');
    RETURN NULL;
END $$;
CREATE FUNCTION cluster_capacity_node_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_nodes(ARRAY(SELECT n::cluster_node FROM new_rows n), ARRAY(SELECT o::cluster_node FROM old_rows o));
    RETURN NULL;
END $$;
CREATE FUNCTION cluster_capacity_node_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_nodes('{}', ARRAY(SELECT o::cluster_node FROM old_rows o));
    RETURN NULL;
END $$;
CREATE FUNCTION cluster_capacity_namespace_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_namespaces(ARRAY(SELECT n::cluster_namespace FROM new_rows n), '{}');
    RETURN NULL;
END $$;
CREATE FUNCTION cluster_capacity_namespace_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_namespaces(ARRAY(SELECT n::cluster_namespace FROM new_rows n), ARRAY(SELECT o::cluster_namespace FROM old_rows o));
    RETURN NULL;
END $$;
CREATE FUNCTION cluster_capacity_namespace_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cluster_capacity_add_namespaces('{}', ARRAY(SELECT o::cluster_namespace FROM old_rows o));
    RETURN NULL;
END $$;

CREATE TRIGGER cluster_node_sum_insert AFTER INSERT ON cluster_node
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_node_insert();
CREATE TRIGGER cluster_node_sum_update AFTER UPDATE ON cluster_node
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_node_update();
CREATE TRIGGER cluster_node_sum_delete AFTER DELETE ON cluster_node
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_node_delete();
CREATE TRIGGER cluster_namespace_sum_insert AFTER INSERT ON cluster_namespace
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_namespace_insert();
CREATE TRIGGER cluster_namespace_sum_update AFTER UPDATE ON cluster_namespace
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_namespace_update();
CREATE TRIGGER cluster_namespace_sum_delete AFTER DELETE ON cluster_namespace
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_capacity_namespace_delete();

-- Existing members, summed once, as a writer would (docs/registry.md,
-- "resourceVersion"): under the writer lock, stamped above the registry's
-- present, which is then raised; each row is logged as ADDED.
SELECT resource_version FROM registry_state FOR UPDATE;
SELECT cluster_capacity_add_nodes(ARRAY(SELECT n FROM cluster_node n), '{}');
SELECT cluster_capacity_add_namespaces(ARRAY(SELECT n FROM cluster_namespace n), '{}');
UPDATE registry_state SET resource_version = greatest(resource_version,
    (SELECT coalesce(max(resource_version), 0) FROM cluster_capacity));
