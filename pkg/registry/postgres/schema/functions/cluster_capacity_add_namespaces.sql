-- cluster_capacity_add_namespaces is cluster_capacity_add_nodes for
-- namespace rows: it adds those in added and subtracts those in removed
-- (namespaces and their non-terminal pods) from their members' rows, stamps
-- only rows whose values change, and creates a member's row only for an
-- added namespace. PL/pgSQL with a generic plan, without JIT, for the same
-- reasons.
--
-- The committed quota (migration 030, issue 53): quota_hard, quota_used,
-- quota_scoped_hard and quota_scoped_used sum registry_quota_commitment
-- over the member's namespaces. Only the rows whose quotas change are read:
-- an updated row whose old and new quotas agree cancels out before the
-- quotas are parsed, so a pod count's change costs a grouping, no parse;
-- the others are read in one call (BenchmarkApplyQuotas).
CREATE OR REPLACE FUNCTION cluster_capacity_add_namespaces(added cluster_namespace[], removed cluster_namespace[]) RETURNS void LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS $$BEGIN

    WITH r AS (
        SELECT 1 AS s, a.* FROM unnest(added) AS a
        UNION ALL
        SELECT -1, o.* FROM unnest(removed) AS o
    ), counts AS (
        SELECT cluster_id, sum(s)::bigint AS namespaces, sum(s * pod_count)::bigint AS pods
        FROM r GROUP BY cluster_id
    ), quota AS (
        -- the committed sums' changes per member and map, without zero changes
        SELECT cluster_id,
            coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'hard'), '{}') AS quota_hard,
            coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'used'), '{}') AS quota_used,
            coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'scoped_hard'), '{}') AS quota_scoped_hard,
            coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'scoped_used'), '{}') AS quota_scoped_used
        FROM (
            SELECT k.member AS cluster_id, k.map, k.resource, k.amount AS v
            FROM (
                SELECT array_agg(cluster_id) AS members, array_agg(s) AS signs, array_agg(quotas) AS quotas FROM (
                    SELECT cluster_id, name, quotas, sum(s)::int AS s FROM r WHERE quotas <> '[]'
                    GROUP BY 1, 2, 3 HAVING sum(s) <> 0) x
            ) x CROSS JOIN LATERAL registry_quota_commitment(x.members, x.signs, x.quotas) AS k
        ) c GROUP BY cluster_id
    ), d AS (
        SELECT counts.*, coalesce(q.quota_hard, '{}') AS quota_hard, coalesce(q.quota_used, '{}') AS quota_used,
            coalesce(q.quota_scoped_hard, '{}') AS quota_scoped_hard, coalesce(q.quota_scoped_used, '{}') AS quota_scoped_used
        FROM counts LEFT JOIN quota q USING (cluster_id)
    ), updated AS (
        UPDATE cluster_capacity c SET namespaces = c.namespaces + d.namespaces, pods = c.pods + d.pods,
            quota_hard = CASE WHEN d.quota_hard = '{}' THEN c.quota_hard ELSE registry_jsonb_add(c.quota_hard, d.quota_hard) END,
            quota_used = CASE WHEN d.quota_used = '{}' THEN c.quota_used ELSE registry_jsonb_add(c.quota_used, d.quota_used) END,
            quota_scoped_hard = CASE WHEN d.quota_scoped_hard = '{}' THEN c.quota_scoped_hard
                ELSE registry_jsonb_add(c.quota_scoped_hard, d.quota_scoped_hard) END,
            quota_scoped_used = CASE WHEN d.quota_scoped_used = '{}' THEN c.quota_scoped_used
                ELSE registry_jsonb_add(c.quota_scoped_used, d.quota_scoped_used) END,
            resource_version = registry_next_rv()
        FROM d
        WHERE c.cluster_id = d.cluster_id AND ((d.namespaces, d.pods) IS DISTINCT FROM (0, 0)
            OR (d.quota_hard, d.quota_used, d.quota_scoped_hard, d.quota_scoped_used)
                IS DISTINCT FROM ('{}'::jsonb, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb))
        RETURNING 1
    )
    INSERT INTO cluster_capacity (cluster_id, namespaces, pods, quota_hard, quota_used, quota_scoped_hard, quota_scoped_used, resource_version)
    SELECT d.cluster_id, d.namespaces, d.pods, d.quota_hard, d.quota_used, d.quota_scoped_hard, d.quota_scoped_used, registry_next_rv()
    FROM d WHERE NOT EXISTS (SELECT 1 FROM cluster_capacity c WHERE c.cluster_id = d.cluster_id)
        AND d.cluster_id IN (SELECT cluster_id FROM unnest(added));
END$$;
