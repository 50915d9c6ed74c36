ALTER TABLE cluster_capacity
    DROP COLUMN quota_hard,
    DROP COLUMN quota_used,
    DROP COLUMN quota_scoped_hard,
    DROP COLUMN quota_scoped_used;
SELECT registry_define_log_update('cluster_capacity', 'ClusterCapacity');
ALTER TABLE cluster_resource_quota DROP COLUMN scopes;
DROP FUNCTION IF EXISTS registry_quota_commitment(text[], int[], jsonb[]);
DROP FUNCTION IF EXISTS registry_quantity(text);

-- cluster_capacity_add_namespaces as release 029 had it (its file then).
-- cluster_capacity_add_namespaces is cluster_capacity_add_nodes for
-- namespace rows: it adds those in added and subtracts those in removed
-- (namespaces and their non-terminal pods) from their members' rows, stamps
-- only rows whose values change, and creates a member's row only for an
-- added namespace. PL/pgSQL with a generic plan, without JIT, for the same
-- reasons.
CREATE OR REPLACE FUNCTION cluster_capacity_add_namespaces(added cluster_namespace[], removed cluster_namespace[]) RETURNS void LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS $$BEGIN

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
        AND d.cluster_id IN (SELECT cluster_id FROM unnest(added));
END$$;
