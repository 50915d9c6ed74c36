-- registry:called-by-migrations
-- registry_quota_commitment is what namespaces' ResourceQuotas promise their
-- pods, summed per member: for the namespace rows given as three arrays of
-- one length (the member, a sign +1 or -1, the row's cluster_namespace.quotas:
-- name, hard, used, scopes), per member, map and resource, the sum of sign ×
-- each namespace's amount, zero sums left out. The resources are those that
-- quotas limit on pods: pods, requests.<resource> and limits.<resource>
-- (requests.storage, a PVC's, left out), the bare cpu, memory and
-- ephemeral-storage counting as requests.<them>, as the quota admission's
-- pod evaluator counts them. Amounts in the resource's base unit
-- (registry_quantity). As quota admission decides: a pod must fit every
-- quota of its namespace that matches it, so quotas do not add up within a
-- namespace:
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
-- bounded by the lesser hard (the first name among equal ones). A quota
-- without a scopes key (written before migration 030, or with no scopes)
-- has none. docs/clustercapacity.md, "Committed quota"; the rule in Go for
-- the tests: clustercapacity.NamespaceCommitment.
--
-- Set-based, over all the rows at once (a few sorts, one grouping), not a
-- call per row, and without ordered aggregates (a sort per group): 50-75 µs
-- a namespace row either way. Each quantity is read once (k is
-- materialized, e is read twice). Migration
-- 030's backfill calls it, hence the first line; cluster_capacity_add_namespaces
-- keeps the sums with it.
CREATE OR REPLACE FUNCTION registry_quota_commitment(members text[], signs int[], quotas jsonb[])
RETURNS TABLE (member text, map text, resource text, amount numeric) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH k AS MATERIALIZED (
        SELECT n.i, n.m, n.s, q.ord, q.value->>'name' AS quota,
            coalesce(jsonb_array_length(CASE jsonb_typeof(q.value->'scopes') WHEN 'array' THEN q.value->'scopes' END), 0) > 0 AS scoped,
            h.key, CASE WHEN h.key IN ('cpu', 'memory', 'ephemeral-storage') THEN 'requests.' || h.key ELSE h.key END AS res,
            registry_quantity(h.value) AS hard, q.value->'used'->>h.key AS used
        FROM unnest(members, signs, quotas) WITH ORDINALITY AS n(m, s, quotas, i)
        CROSS JOIN LATERAL jsonb_array_elements(CASE jsonb_typeof(n.quotas) WHEN 'array' THEN n.quotas ELSE '[]' END) WITH ORDINALITY AS q(value, ord)
        CROSS JOIN LATERAL jsonb_each_text(CASE jsonb_typeof(q.value->'hard') WHEN 'object' THEN q.value->'hard' ELSE '{}' END) AS h
        WHERE h.key IN ('cpu', 'memory', 'ephemeral-storage', 'pods') OR h.key LIKE 'limits.%'
            OR h.key LIKE 'requests.%' AND h.key <> 'requests.storage'
    ), e AS (
        -- per quota and resource: the least hard (cpu and requests.cpu are one), and its used
        SELECT DISTINCT ON (i, ord, res) i, m, s, quota, scoped, res, hard, coalesce(registry_quantity(used), 0) AS used
        FROM k WHERE hard IS NOT NULL ORDER BY i, ord, res, hard, key
    ), u AS (
        -- per namespace row and resource: the least hard without scopes, the first quota by name among equals
        SELECT DISTINCT ON (i, res) i, m, s, res, hard, used FROM e WHERE NOT scoped ORDER BY i, res, hard, quota
    ), a AS (
        SELECT m, 'hard' AS map, res, s * hard AS amount FROM u
        UNION ALL SELECT m, 'used', res, s * used FROM u
        UNION ALL SELECT m, 'scoped_hard', res, s * hard FROM e
            WHERE scoped AND NOT EXISTS (SELECT 1 FROM u WHERE u.i = e.i AND u.res = e.res)
        UNION ALL SELECT m, 'scoped_used', res, s * used FROM e
            WHERE scoped AND NOT EXISTS (SELECT 1 FROM u WHERE u.i = e.i AND u.res = e.res)
    )
    SELECT m, map, res, sum(amount) FROM a GROUP BY 1, 2, 3 HAVING sum(amount) <> 0
$$;
