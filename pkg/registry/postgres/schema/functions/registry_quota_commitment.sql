-- registry:called-by-migrations
-- registry_quota_commitment is what one namespace's ResourceQuotas (a
-- cluster_namespace.quotas array: name, hard, used, scopes) promise its
-- pods, per resource that quotas limit on pods: pods, requests.<resource>
-- and limits.<resource> (requests.storage, a PVC's, left out), the bare
-- cpu, memory and ephemeral-storage counting as requests.<them>, as the
-- quota admission's pod evaluator counts them. Amounts in the resource's
-- base unit (registry_quantity). As quota admission decides: a pod must
-- fit every quota of its namespace that matches it, so quotas do not add
-- up within a namespace:
--
-- - map 'hard'/'used': where a quota without scopes limits the resource
--   (every pod matches it), the least such hard, and the used of that
--   quota (the first by name among equal hards);
-- - map 'scoped_hard'/'scoped_used': where only quotas with scopes limit
--   it, the sum of their hards and useds: each bounds only the pods its
--   scopes match, so the sum bounds those pods (more than bounds them when
--   scopes overlap), and pods no scope matches are not bounded at all.
--
-- Within one quota, a resource named twice (cpu and requests.cpu) is
-- bounded by the lesser hard. A quota without a scopes key (written before
-- migration 030, or with no scopes) has none. docs/clustercapacity.md,
-- "Committed quota". Migration 030's backfill calls it, hence the first
-- line; cluster_capacity_add_namespaces keeps the sums.
CREATE OR REPLACE FUNCTION registry_quota_commitment(quotas jsonb) RETURNS TABLE (map text, resource text, amount numeric)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH e AS (
        SELECT DISTINCT ON (q.ord, r.resource) q.ord, q.value->>'name' AS quota,
            coalesce(jsonb_array_length(CASE jsonb_typeof(q.value->'scopes') WHEN 'array' THEN q.value->'scopes' END), 0) > 0 AS scoped,
            r.resource, r.hard, coalesce(registry_quantity(q.value->'used'->>h.key), 0) AS used
        FROM jsonb_array_elements(quotas) WITH ORDINALITY AS q(value, ord)
        CROSS JOIN LATERAL jsonb_each_text(CASE jsonb_typeof(q.value->'hard') WHEN 'object' THEN q.value->'hard' ELSE '{}' END) AS h
        CROSS JOIN LATERAL (SELECT CASE WHEN h.key IN ('cpu', 'memory', 'ephemeral-storage') THEN 'requests.' || h.key ELSE h.key END AS resource,
            registry_quantity(h.value) AS hard) r
        WHERE r.hard IS NOT NULL
            AND (r.resource = 'pods' OR r.resource LIKE 'limits.%' OR r.resource LIKE 'requests.%' AND r.resource <> 'requests.storage')
        ORDER BY q.ord, r.resource, r.hard, h.key
    ), n AS (
        SELECT resource, bool_and(scoped) AS scoped_only,
            CASE WHEN bool_and(scoped) THEN sum(hard)
                ELSE (array_agg(hard ORDER BY hard, quota) FILTER (WHERE NOT scoped))[1] END AS hard,
            CASE WHEN bool_and(scoped) THEN sum(used)
                ELSE (array_agg(used ORDER BY hard, quota) FILTER (WHERE NOT scoped))[1] END AS used
        FROM e GROUP BY resource
    )
    SELECT CASE WHEN scoped_only THEN 'scoped_hard' ELSE 'hard' END, resource, hard FROM n
    UNION ALL
    SELECT CASE WHEN scoped_only THEN 'scoped_used' ELSE 'used' END, resource, used FROM n
$$;
