-- Computes the pod count, requests (cpu, memory, requested_other), quotas
-- and DRA claims per device class (device_claims) of the namespaces keyed in
-- $1, a JSON array of {"cluster_id", "name"} (pairRow); unscheduled pods
-- count. Returns, as aggregates_nodes does, those of the namespaces named
-- in $2 (the namespaces the batch writes), then those of the others whose
-- row's values differ, for the view's stamp statement.
WITH written AS (
	-- $2 as a set: looked up by a hashed subplan, where = ANY($2) in a
	-- generic plan compares each row with every name
	SELECT unnest($2::text[]) AS name
), t AS (
	SELECT DISTINCT cluster_id, name FROM jsonb_to_recordset($1::jsonb) AS t(cluster_id text, name text)
), pods AS (
	SELECT t.cluster_id, t.name,
		coalesce(sum(p.cpu_request_millis), 0)::bigint   AS cpu,
		coalesce(sum(p.memory_request_bytes), 0)::bigint AS mem,
		count(p.name)::bigint                            AS pods
	FROM t LEFT JOIN cluster_pod p
		ON p.cluster_id = t.cluster_id AND p.namespace = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
	GROUP BY t.cluster_id, t.name
), other AS (
	-- requests_other summed key by key in one grouping (zero sums left out),
	-- not with registry_jsonb_sum's call per pod
	SELECT cluster_id, name, coalesce(jsonb_object_agg(key, v) FILTER (WHERE key IS NOT NULL AND v <> 0), '{}') AS other
	FROM (
		SELECT t.cluster_id, t.name, e.key, sum(e.value::numeric) AS v
		FROM t LEFT JOIN cluster_pod p
			ON p.cluster_id = t.cluster_id AND p.namespace = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
			AND p.requests_other <> '{}'
		LEFT JOIN LATERAL jsonb_each_text(p.requests_other) AS e ON true
		GROUP BY 1, 2, 3) s
	GROUP BY cluster_id, name
), quotas AS (
	SELECT t.cluster_id, t.name,
		-- scopes only for a quota that has some (migration 030), so a
		-- namespace's quotas without scopes read as before
		coalesce(jsonb_agg(jsonb_build_object('name', q.name, 'hard', q.hard, 'used', q.used)
			|| CASE WHEN q.scopes <> '[]' THEN jsonb_build_object('scopes', q.scopes) ELSE '{}' END ORDER BY q.name)
			FILTER (WHERE q.name IS NOT NULL), '[]'::jsonb) AS quotas
	FROM t LEFT JOIN cluster_resource_quota q ON q.cluster_id = t.cluster_id AND q.namespace = t.name
	GROUP BY t.cluster_id, t.name
), claims AS (
	SELECT t.cluster_id, t.name,
		coalesce(jsonb_object_agg(k.class, jsonb_build_object('claims', k.claims, 'devices', k.devices))
			FILTER (WHERE k.class IS NOT NULL), '{}') AS claims
	FROM t LEFT JOIN LATERAL (
		SELECT e.key AS class, count(*) AS claims, sum(e.value::numeric)::bigint AS devices
		FROM cluster_resource_claim c CROSS JOIN LATERAL jsonb_each_text(c.classes) AS e
		WHERE c.cluster_id = t.cluster_id AND c.namespace = t.name
		GROUP BY e.key) k ON true
	GROUP BY t.cluster_id, t.name
), v AS (
	SELECT pods.cluster_id, pods.name, pods.pods AS pod_count, pods.cpu AS cpu_request_millis, pods.mem AS memory_request_bytes,
		other.other AS requested_other, quotas.quotas, claims.claims AS device_claims
	FROM pods JOIN quotas ON quotas.cluster_id = pods.cluster_id AND quotas.name = pods.name
		JOIN other ON other.cluster_id = pods.cluster_id AND other.name = pods.name
		JOIN claims ON claims.cluster_id = pods.cluster_id AND claims.name = pods.name
		LEFT JOIN cluster_namespace c ON c.cluster_id = pods.cluster_id AND c.name = pods.name
	WHERE pods.name IN (SELECT name FROM written) OR c.name IS NOT NULL AND (
		(c.pod_count, c.cpu_request_millis, c.memory_request_bytes, c.requested_other, c.quotas, c.device_claims)
		IS DISTINCT FROM (pods.pods, pods.cpu, pods.mem, other.other, quotas.quotas, claims.claims))
)
SELECT coalesce(jsonb_agg(to_jsonb(v) - 'written') FILTER (WHERE v.written), '[]'),
	coalesce(jsonb_agg(to_jsonb(v) - 'written') FILTER (WHERE NOT v.written), '[]'), count(*) FILTER (WHERE NOT v.written)
FROM (SELECT v.*, v.name IN (SELECT name FROM written) AS written FROM v) v
