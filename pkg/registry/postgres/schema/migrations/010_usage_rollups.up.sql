-- Hourly rollups of the node metrics history (issue 12, docs/registry.md,
-- "Usage history"), so a percentile of a member's usage over a day reads a
-- few rows, not every sample. Kept as samples arrive, in the statement
-- that stores them (metrics_record.sql), and expired with the history's
-- partitions. One row per UTC hour and node, and per hour and member under
-- node '' (no node has an empty name), each with its histograms.

-- usage_bucket maps a usage value to its histogram bucket: bucket b >= 1
-- holds [1.02^(b-1), 1.02^b), so a bucket's representative value is within
-- 1 % of every value it holds; bucket 0 holds zero and below.
CREATE FUNCTION usage_bucket(v bigint) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN v <= 0 THEN 0 ELSE 1 + floor(ln(v::float8) / ln(1.02))::smallint END
$$;

-- usage_histogram_add adds two sparse histograms (ascending buckets and
-- their counts).
CREATE FUNCTION usage_histogram_add(a_buckets smallint[], a_counts bigint[], b_buckets smallint[], b_counts bigint[],
    OUT buckets smallint[], OUT counts bigint[])
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(b ORDER BY b), array_agg(n ORDER BY b) FROM (
        SELECT b, sum(n)::bigint AS n FROM (
            SELECT * FROM unnest(a_buckets, a_counts) AS x(b, n)
            UNION ALL
            SELECT * FROM unnest(b_buckets, b_counts) AS y(b, n)
        ) z GROUP BY b
    ) s
$$;

CREATE TABLE cluster_node_usage_hourly (
    cluster_id      text COLLATE "C" NOT NULL,
    node            text COLLATE "C" NOT NULL,
    hour            timestamptz      NOT NULL,
    samples         bigint           NOT NULL,
    cpu_sum         numeric          NOT NULL,
    cpu_max         bigint           NOT NULL,
    memory_sum      numeric          NOT NULL,
    memory_max      bigint           NOT NULL,
    -- Histograms: ascending usage_bucket values and their sample counts.
    cpu_buckets     smallint[]       NOT NULL,
    cpu_counts      bigint[]         NOT NULL,
    memory_buckets  smallint[]       NOT NULL,
    memory_counts   bigint[]         NOT NULL,
    PRIMARY KEY (cluster_id, node, hour)
);
CREATE INDEX cluster_node_usage_hourly_hour_idx ON cluster_node_usage_hourly (hour);

-- The history kept so far, rolled up once.
INSERT INTO cluster_node_usage_hourly
WITH rolled AS (
    SELECT m.cluster_id, n.node, date_trunc('hour', m.observed_at, 'UTC') AS hour,
           m.cpu_usage_nanocores AS cpu, m.memory_usage_bytes AS memory
    FROM cluster_node_metrics m, LATERAL (VALUES (m.node), ('')) n(node)
), bucketed AS (
    SELECT cluster_id, node, hour, 'c'::"char" AS resource, usage_bucket(cpu) AS bucket, count(*) AS n FROM rolled GROUP BY 1, 2, 3, 5
    UNION ALL
    SELECT cluster_id, node, hour, 'm'::"char", usage_bucket(memory), count(*) FROM rolled GROUP BY 1, 2, 3, 5
), histograms AS (
    SELECT cluster_id, node, hour,
        array_agg(bucket ORDER BY bucket) FILTER (WHERE resource = 'c') AS cpu_buckets,
        array_agg(n ORDER BY bucket) FILTER (WHERE resource = 'c') AS cpu_counts,
        array_agg(bucket ORDER BY bucket) FILTER (WHERE resource = 'm') AS memory_buckets,
        array_agg(n ORDER BY bucket) FILTER (WHERE resource = 'm') AS memory_counts
    FROM bucketed GROUP BY cluster_id, node, hour
), rollup_rows AS (
    SELECT s.cluster_id, s.node, s.hour, s.samples, s.cpu_sum, s.cpu_max, s.memory_sum, s.memory_max,
        h.cpu_buckets, h.cpu_counts, h.memory_buckets, h.memory_counts
    FROM (SELECT cluster_id, node, hour, count(*) AS samples, sum(cpu) AS cpu_sum, max(cpu) AS cpu_max,
                 sum(memory) AS memory_sum, max(memory) AS memory_max
          FROM rolled GROUP BY cluster_id, node, hour) s
    JOIN histograms h USING (cluster_id, node, hour)
)
SELECT * FROM rollup_rows;
