-- Committed quota per member (issue 53): ClusterCapacity sums, per resource
-- that quotas limit on pods, what every namespace's ResourceQuotas promise
-- (registry_quota_commitment: the least hard of the quotas without scopes,
-- else the sum of the scoped ones'), kept by cluster_capacity_add_namespaces
-- in the writing transaction from cluster_namespace.quotas, which now names
-- each quota's scopes (docs/clustercapacity.md, "Committed quota").
--
-- Compatible (docs/upgrades.md): the release before reads none of the new
-- columns and writes quotas without scopes; its writes keep the sums too,
-- as the trigger lives in the database. A quota row whose scopes are NULL
-- (mirrored before this migration, or by the release before beside it)
-- counts as unscoped, and its member's quotas are relisted when a replica
-- that knows scopes claims the member (writes/sql/cluster_claim_quota_scopes.sql
-- drops the quotas' cursor), which writes them: scopes are immutable in
-- Kubernetes, so once is enough.
ALTER TABLE cluster_resource_quota ADD COLUMN scopes jsonb;
ALTER TABLE cluster_capacity
    ADD COLUMN quota_hard        jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN quota_used        jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN quota_scoped_hard jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN quota_scoped_used jsonb NOT NULL DEFAULT '{}';
SELECT registry_define_log_update('cluster_capacity', 'ClusterCapacity');

-- The backfill: the sums of the namespaces there are, stamped with a
-- version of this transaction's commit ticket and published after every
-- earlier ticket ended, as a writer does (writes/write.go), so watchers see
-- the members' rows change. A registry without quotas takes no ticket.
DO $$BEGIN
    IF EXISTS (SELECT 1 FROM cluster_namespace WHERE quotas <> '[]') THEN
        UPDATE cluster_capacity c SET quota_hard = s.quota_hard, quota_used = s.quota_used,
            quota_scoped_hard = s.quota_scoped_hard, quota_scoped_used = s.quota_scoped_used,
            resource_version = registry_next_rv()
        FROM (
            SELECT cluster_id,
                coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'hard'), '{}') AS quota_hard,
                coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'used'), '{}') AS quota_used,
                coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'scoped_hard'), '{}') AS quota_scoped_hard,
                coalesce(jsonb_object_agg(resource, v) FILTER (WHERE map = 'scoped_used'), '{}') AS quota_scoped_used
            FROM (
                SELECT k.member AS cluster_id, k.map, k.resource, k.amount AS v
                FROM (SELECT array_agg(cluster_id) AS members, array_agg(1) AS signs, array_agg(quotas) AS quotas
                    FROM cluster_namespace WHERE quotas <> '[]') n
                CROSS JOIN LATERAL registry_quota_commitment(n.members, n.signs, n.quotas) AS k
            ) x GROUP BY cluster_id
        ) s
        WHERE c.cluster_id = s.cluster_id;
        IF FOUND THEN
            PERFORM registry_wait_tickets(0);
            UPDATE registry_state SET resource_version = greatest(resource_version,
                (SELECT max(resource_version) FROM cluster_capacity));
        END IF;
    END IF;
END$$;
