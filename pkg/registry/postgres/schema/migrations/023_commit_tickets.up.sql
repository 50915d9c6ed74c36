-- Writers commit in ticket order (docs/registry.md, "Commits in ticket
-- order"): a writer's views section no longer holds the one writer lock.
-- It takes a ticket t, stamps versions t × 2^22 + n (n counting up from 1
-- in the transaction), and before it publishes waits for every earlier
-- ticket's transaction to end, so transactions commit in version order and
-- every snapshot still holds a prefix of the versions.
--
-- Advisory locks of class 1953063787 ("tick", TicketClass in write.go):
-- (class, t mod 2^31) is held by ticket t's transaction, exclusively by its
-- owner and shared by the later tickets that waited for it; (class, -1) is
-- the barrier every ticket holder shares and a failover takes alone.

CREATE SEQUENCE registry_ticket AS bigint;
SELECT setval('registry_ticket', (greatest((SELECT resource_version FROM registry_state),
    (SELECT last_value FROM registry_resource_version)) >> 22) + 1);

-- The transaction's ticket, taken on the first call: returns t × 2^22, the
-- version every one this transaction stamps lies above. Taking the number
-- and locking it is made atomic by a check: once the lock is held, a later
-- ticket that already published (it took the lock shared before this one
-- and so did not wait for it) sends this writer to a new ticket.
CREATE FUNCTION registry_take_ticket() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t bigint := nullif(current_setting('registry.ticket', true), '')::bigint;
BEGIN
    IF t IS NOT NULL THEN
        RETURN t << 22;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1953063787, -1);
    LOOP
        t := nextval('registry_ticket');
        PERFORM pg_advisory_xact_lock(1953063787, (t % 2147483648)::int);
        EXIT WHEN (SELECT resource_version FROM registry_state) < t << 22;
    END LOOP;
    PERFORM set_config('registry.ticket', t::text, true);
    PERFORM set_config('registry.next_rv', ((t << 22) + 1)::text, true);
    RETURN t << 22;
END $$;

-- The transaction's next resourceVersion, in place of nextval of the old
-- sequence. Plain SQL so it is inlined: about 1 µs a row where a PL/pgSQL
-- function costs 6. A writer that stamped 2^22 or more versions fails at
-- publish (registry_wait_tickets).
CREATE FUNCTION registry_next_rv() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT set_config('registry.next_rv',
        (coalesce(nullif(current_setting('registry.next_rv', true), '')::bigint, registry_take_ticket() + 1) + 1)::text,
        true)::bigint - 1
$$;

-- Waits for every ticket between the last published one and this
-- transaction's to end, unless the transaction's ticket is at most $1
-- tickets past the published one, and says whether it waited: a shared
-- lock on each, granted at once for one that ended or was never locked (its
-- owner then finds this transaction's publish and takes a new ticket).
-- Writers that stamped versions wait always ($1 = 0); one that stamped
-- nothing only when the tickets no one published pile up (write.go), so
-- the next waits take few locks. Fails if the transaction stamped more
-- versions than its ticket holds.
CREATE FUNCTION registry_wait_tickets(lag bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t         bigint := current_setting('registry.ticket')::bigint;
    published bigint := (SELECT resource_version FROM registry_state) >> 22;
BEGIN
    IF current_setting('registry.next_rv')::bigint > (t + 1) << 22 THEN
        RAISE EXCEPTION 'a transaction stamped more than 4194303 resourceVersions (ticket %)', t;
    END IF;
    IF t - published <= lag THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1953063787, (i % 2147483648)::int) FROM generate_series(published + 1, t - 1) i;
    RETURN true;
END $$;

-- Every function that took versions from the old sequence (the change-log
-- and ClusterCapacity triggers) takes them from the ticket instead. These
-- are their bodies as of this migration; today's are in schema/functions.
CREATE OR REPLACE FUNCTION registry_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
    deleted   bigint;
    logged    bigint;
BEGIN
    WITH gone AS (
        SELECT o.resource_version AS rv, o.cluster_id, o.name, to_jsonb(o) AS obj FROM old_rows o
    ), dropped AS (
        DELETE FROM registry_change c USING gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type = 'ADDED'
        RETURNING 1
    ), folded AS (
        UPDATE registry_change c SET type = 'DELETED', prev_object = jsonb_strip_nulls(g.obj || c.prev_delta || jsonb_build_object('resource_version', c.prev_rv)),
            prev_delta = NULL
        FROM gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type <> 'ADDED'
        RETURNING 1
    ), tombstones AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, prev_rv, prev_object)
        SELECT registry_next_rv(), view_kind, g.cluster_id, g.name, 'DELETED', g.rv, jsonb_strip_nulls(g.obj)
        FROM gone g WHERE g.rv <= start_rv
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone),
        (SELECT count(*) FROM dropped) + (SELECT count(*) FROM folded) + (SELECT count(*) FROM tombstones)
    INTO deleted, logged;
    IF deleted <> logged THEN
        RAISE EXCEPTION '% % rows stamped by this transaction have no log entry (start %)', deleted - logged, view_kind, start_rv;
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION cluster_capacity_add_nodes(added cluster_node[], removed cluster_node[]) RETURNS void LANGUAGE sql SET jit = off AS $$
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
    ), other AS (
        -- the other resources' sums per member, one object per column, without zero deltas
        SELECT cluster_id,
            coalesce(jsonb_object_agg(key, v) FILTER (WHERE map = 'all_allocatable'), '{}') AS all_allocatable_other,
            coalesce(jsonb_object_agg(key, v) FILTER (WHERE map = 'all_requested'), '{}') AS all_requested_other,
            coalesce(jsonb_object_agg(key, v) FILTER (WHERE map = 'sched_allocatable'), '{}') AS sched_allocatable_other,
            coalesce(jsonb_object_agg(key, v) FILTER (WHERE map = 'sched_requested'), '{}') AS sched_requested_other,
            coalesce(jsonb_object_agg(key, v) FILTER (WHERE map = 'nodes_with'), '{}') AS nodes_with
        FROM (
            SELECT r.cluster_id, e.map, e.key, sum(r.s * e.v) AS v
            FROM r CROSS JOIN LATERAL (
                SELECT 'all_allocatable' AS map, key, value::numeric AS v FROM jsonb_each_text(r.allocatable_other)
                UNION ALL SELECT 'all_requested', key, value::numeric FROM jsonb_each_text(r.requested_other)
                UNION ALL SELECT 'sched_allocatable', key, value::numeric FROM jsonb_each_text(r.allocatable_other) WHERE r.schedulable
                UNION ALL SELECT 'sched_requested', key, value::numeric FROM jsonb_each_text(r.requested_other) WHERE r.schedulable
                UNION ALL SELECT 'nodes_with', key, 1 FROM jsonb_object_keys(r.allocatable_other) AS key
            ) e
            GROUP BY 1, 2, 3 HAVING sum(r.s * e.v) <> 0
        ) x GROUP BY cluster_id
    ), touched AS (
        -- the other resources of the nodes whose schedulability or other
        -- resources changed (not a usage report's): their largest free
        -- amounts are read again
        SELECT DISTINCT x.cluster_id, k.key FROM (
            -- a row whose old and new versions agree on these cancels out
            SELECT cluster_id, name, schedulable, allocatable_other, requested_other FROM r
            GROUP BY 1, 2, 3, 4, 5 HAVING sum(s) <> 0
        ) x CROSS JOIN LATERAL jsonb_object_keys(x.allocatable_other) AS k(key)
    ), free AS (
        SELECT t.cluster_id,
            jsonb_object_agg(t.key, m.v) FILTER (WHERE m.v IS NOT NULL) AS found,
            array_agg(t.key) AS keys
        FROM touched t CROSS JOIN LATERAL (
            SELECT max((n.allocatable_other->>t.key)::numeric - coalesce((n.requested_other->>t.key)::numeric, 0)) AS v
            FROM cluster_node n WHERE n.cluster_id = t.cluster_id AND n.schedulable AND n.allocatable_other ? t.key) m
        GROUP BY t.cluster_id
    ), od AS (
        SELECT delta.cluster_id,
            coalesce(o.all_allocatable_other, '{}') AS all_allocatable_other,
            coalesce(o.all_requested_other, '{}') AS all_requested_other,
            coalesce(o.sched_allocatable_other, '{}') AS sched_allocatable_other,
            coalesce(o.sched_requested_other, '{}') AS sched_requested_other,
            coalesce(o.nodes_with, '{}') AS nodes_with,
            coalesce(f.found, '{}') AS free_found, coalesce(f.keys, '{}') AS free_keys
        FROM delta LEFT JOIN other o USING (cluster_id) LEFT JOIN free f USING (cluster_id)
    ), d AS (
        SELECT delta.*, od.all_allocatable_other, od.all_requested_other, od.sched_allocatable_other, od.sched_requested_other,
            od.nodes_with, od.free_found, od.free_keys,
            (SELECT n.allocatable_cpu_millis::numeric - n.requested_cpu_millis FROM cluster_node n
             WHERE n.cluster_id = delta.cluster_id AND n.schedulable
             ORDER BY n.allocatable_cpu_millis::numeric - n.requested_cpu_millis DESC LIMIT 1) AS max_free_cpu_millis,
            (SELECT n.allocatable_memory_bytes::numeric - n.requested_memory_bytes FROM cluster_node n
             WHERE n.cluster_id = delta.cluster_id AND n.schedulable
             ORDER BY n.allocatable_memory_bytes::numeric - n.requested_memory_bytes DESC LIMIT 1) AS max_free_memory_bytes
        FROM delta JOIN od USING (cluster_id)
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
            all_allocatable_other = registry_jsonb_add(c.all_allocatable_other, d.all_allocatable_other),
            all_requested_other = registry_jsonb_add(c.all_requested_other, d.all_requested_other),
            sched_allocatable_other = registry_jsonb_add(c.sched_allocatable_other, d.sched_allocatable_other),
            sched_requested_other = registry_jsonb_add(c.sched_requested_other, d.sched_requested_other),
            nodes_with = registry_jsonb_add(c.nodes_with, d.nodes_with),
            max_free_other = (c.max_free_other - d.free_keys) || d.free_found,
            max_free_cpu_millis = d.max_free_cpu_millis,
            max_free_memory_bytes = d.max_free_memory_bytes,
            has_room = cluster_capacity_room(d.max_free_cpu_millis, d.max_free_memory_bytes),
            has_room_since = CASE WHEN c.has_room = cluster_capacity_room(d.max_free_cpu_millis, d.max_free_memory_bytes)
                THEN c.has_room_since ELSE now() END,
            resource_version = registry_next_rv()
        FROM d
        WHERE c.cluster_id = d.cluster_id
            AND ((d.nodes, d.nodes_ready, d.nodes_schedulable, d.nodes_cordoned, d.nodes_tainted, d.all_allocatable_cpu_millis, d.all_allocatable_memory_bytes, d.all_allocatable_pods, d.all_requested_cpu_millis, d.all_requested_memory_bytes, d.all_requested_pods, d.all_usage_cpu_nanocores, d.all_usage_memory_bytes, d.all_usage_nodes, d.sched_allocatable_cpu_millis, d.sched_allocatable_memory_bytes, d.sched_allocatable_pods, d.sched_requested_cpu_millis, d.sched_requested_memory_bytes, d.sched_requested_pods, d.sched_usage_cpu_nanocores, d.sched_usage_memory_bytes, d.sched_usage_nodes)
                IS DISTINCT FROM (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            OR (c.max_free_cpu_millis, c.max_free_memory_bytes) IS DISTINCT FROM (d.max_free_cpu_millis, d.max_free_memory_bytes)
            OR (d.all_allocatable_other, d.all_requested_other, d.sched_allocatable_other, d.sched_requested_other, d.nodes_with)
                IS DISTINCT FROM ('{}'::jsonb, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb)
            OR c.max_free_other IS DISTINCT FROM (c.max_free_other - d.free_keys) || d.free_found)
        RETURNING 1
    )
    INSERT INTO cluster_capacity (cluster_id, nodes, nodes_ready, nodes_schedulable, nodes_cordoned, nodes_tainted, all_allocatable_cpu_millis, all_allocatable_memory_bytes, all_allocatable_pods, all_requested_cpu_millis, all_requested_memory_bytes, all_requested_pods, all_usage_cpu_nanocores, all_usage_memory_bytes, all_usage_nodes, sched_allocatable_cpu_millis, sched_allocatable_memory_bytes, sched_allocatable_pods, sched_requested_cpu_millis, sched_requested_memory_bytes, sched_requested_pods, sched_usage_cpu_nanocores, sched_usage_memory_bytes, sched_usage_nodes,
        all_allocatable_other, all_requested_other, sched_allocatable_other, sched_requested_other, nodes_with, max_free_other,
        max_free_cpu_millis, max_free_memory_bytes, has_room, resource_version)
    SELECT d.cluster_id, d.nodes, d.nodes_ready, d.nodes_schedulable, d.nodes_cordoned, d.nodes_tainted, d.all_allocatable_cpu_millis, d.all_allocatable_memory_bytes, d.all_allocatable_pods, d.all_requested_cpu_millis, d.all_requested_memory_bytes, d.all_requested_pods, d.all_usage_cpu_nanocores, d.all_usage_memory_bytes, d.all_usage_nodes, d.sched_allocatable_cpu_millis, d.sched_allocatable_memory_bytes, d.sched_allocatable_pods, d.sched_requested_cpu_millis, d.sched_requested_memory_bytes, d.sched_requested_pods, d.sched_usage_cpu_nanocores, d.sched_usage_memory_bytes, d.sched_usage_nodes,
        d.all_allocatable_other, d.all_requested_other, d.sched_allocatable_other, d.sched_requested_other, d.nodes_with, d.free_found,
        d.max_free_cpu_millis, d.max_free_memory_bytes, cluster_capacity_room(d.max_free_cpu_millis, d.max_free_memory_bytes),
        registry_next_rv()
    FROM d WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity c WHERE c.cluster_id = d.cluster_id)
        AND d.cluster_id IN (SELECT cluster_id FROM unnest(added))
$$;
CREATE OR REPLACE FUNCTION cluster_capacity_add_namespaces(added cluster_namespace[], removed cluster_namespace[]) RETURNS void LANGUAGE sql AS $$
    WITH r AS (
        SELECT 1 AS s, a.* FROM unnest(added) AS a
        UNION ALL
        SELECT -1, o.* FROM unnest(removed) AS o
    ), d AS (
        SELECT cluster_id, sum(s)::bigint AS namespaces, sum(s * pod_count)::bigint AS pods
        FROM r GROUP BY cluster_id
    ), updated AS (
        UPDATE cluster_capacity c SET namespaces = c.namespaces + d.namespaces, pods = c.pods + d.pods,
            resource_version = registry_next_rv()
        FROM d
        WHERE c.cluster_id = d.cluster_id AND (d.namespaces, d.pods) IS DISTINCT FROM (0, 0)
        RETURNING 1
    )
    INSERT INTO cluster_capacity (cluster_id, namespaces, pods, resource_version)
    SELECT d.cluster_id, d.namespaces, d.pods, registry_next_rv()
    FROM d WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity c WHERE c.cluster_id = d.cluster_id)
        AND d.cluster_id IN (SELECT cluster_id FROM unnest(added))
$$;

DROP SEQUENCE registry_resource_version;
