-- Computes the requested resources (cpu, memory and requested_other), the
-- pod count and the DRA device counts (devices_total, devices_allocated: the
-- devices of the node's slices of each pool's newest generation, and those
-- of them a claim holds) over the non-terminal pods of the nodes keyed in
-- $1, a JSON array of {"cluster_id", "name"} (pairRow), as rows of
-- cluster_node's aggregate columns: first, as a JSON array, those of the
-- nodes named in $2 (the nodes the batch writes, whose upsert writes them
-- too), then, as a JSON array for the view's stamp statement, and their
-- count, those of the others whose row's values differ. It reads only rows
-- that one member's writers write, under its lock, so Apply runs it there,
-- before its commit ticket. Usage is not an aggregate: RecordNodeMetrics
-- reports it.
WITH written AS (
	-- $2 as a set: looked up by a hashed subplan, where = ANY($2) in a
	-- generic plan compares each row with every name
	SELECT unnest($2::text[]) AS name
), t AS (
	SELECT DISTINCT cluster_id, name FROM jsonb_to_recordset($1::jsonb) AS t(cluster_id text, name text)
), agg AS (
	SELECT t.cluster_id, t.name,
		coalesce(sum(p.cpu_request_millis), 0)::bigint   AS cpu,
		coalesce(sum(p.memory_request_bytes), 0)::bigint AS mem,
		count(p.name)::bigint                            AS pods
	FROM t LEFT JOIN cluster_pod p
		ON p.cluster_id = t.cluster_id AND p.node_name = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
	GROUP BY t.cluster_id, t.name
), other AS (
	-- requests_other summed key by key in one grouping (zero sums left out),
	-- not with registry_jsonb_sum's call per pod
	SELECT cluster_id, name, coalesce(jsonb_object_agg(key, v) FILTER (WHERE key IS NOT NULL AND v <> 0), '{}') AS other
	FROM (
		SELECT t.cluster_id, t.name, e.key, sum(e.value::numeric) AS v
		FROM t LEFT JOIN cluster_pod p
			ON p.cluster_id = t.cluster_id AND p.node_name = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
			AND p.requests_other <> '{}'
		LEFT JOIN LATERAL jsonb_each_text(p.requests_other) AS e ON true
		GROUP BY 1, 2, 3) s
	GROUP BY cluster_id, name
), dev AS (
	SELECT t.cluster_id, t.name,
		coalesce(jsonb_object_agg(d.driver, d.total) FILTER (WHERE d.driver IS NOT NULL), '{}') AS total,
		coalesce(jsonb_object_agg(d.driver, d.allocated) FILTER (WHERE d.driver IS NOT NULL), '{}') AS allocated
	FROM t LEFT JOIN LATERAL (
		SELECT s.driver, count(*) AS total, count(*) FILTER (WHERE EXISTS (
			SELECT 1 FROM cluster_claim_device a
			WHERE a.cluster_id = s.cluster_id AND a.driver = s.driver AND a.pool = s.pool AND a.device = x.device)) AS allocated
		FROM cluster_resource_slice s CROSS JOIN LATERAL unnest(s.devices) AS x(device)
		WHERE s.cluster_id = t.cluster_id AND s.node_name = t.name AND s.pool_generation = (
			SELECT max(p.pool_generation) FROM cluster_resource_slice p
			WHERE p.cluster_id = s.cluster_id AND p.driver = s.driver AND p.pool = s.pool)
		GROUP BY s.driver) d ON true
	GROUP BY t.cluster_id, t.name
), v AS (
	SELECT agg.cluster_id, agg.name, agg.cpu AS requested_cpu_millis, agg.mem AS requested_memory_bytes,
		agg.pods AS pod_count, other.other AS requested_other, dev.total AS devices_total, dev.allocated AS devices_allocated
	FROM agg JOIN dev ON dev.cluster_id = agg.cluster_id AND dev.name = agg.name
		JOIN other ON other.cluster_id = agg.cluster_id AND other.name = agg.name
		LEFT JOIN cluster_node n ON n.cluster_id = agg.cluster_id AND n.name = agg.name
	WHERE agg.name IN (SELECT name FROM written) OR n.name IS NOT NULL AND (
		(n.requested_cpu_millis, n.requested_memory_bytes, n.pod_count, n.requested_other, n.devices_total, n.devices_allocated)
		IS DISTINCT FROM (agg.cpu, agg.mem, agg.pods, other.other, dev.total, dev.allocated))
)
SELECT coalesce(jsonb_agg(to_jsonb(v) - 'written') FILTER (WHERE v.written), '[]'),
	coalesce(jsonb_agg(to_jsonb(v) - 'written') FILTER (WHERE NOT v.written), '[]'), count(*) FILTER (WHERE NOT v.written)
FROM (SELECT v.*, v.name IN (SELECT name FROM written) AS written FROM v) v
