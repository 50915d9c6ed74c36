-- Hourly rollups of the node metrics history (issue 12, docs/registry.md,
-- "Usage history"), so a percentile of a member's usage over a day reads a
-- few thousand rows, not every sample. Kept as samples arrive, in the
-- statement that stores them (metrics_record.sql), and expired with the
-- history's partitions. Per UTC hour and node, and per hour and member
-- under node '' (no node has an empty name).

-- usage_bucket maps a usage value to its histogram bucket: bucket b >= 1
-- holds [1.02^(b-1), 1.02^b), so a bucket's representative value is within
-- 1 % of every value it holds; bucket 0 holds zero and below.
CREATE FUNCTION usage_bucket(v bigint) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN v <= 0 THEN 0 ELSE 1 + floor(ln(v::float8) / ln(1.02))::smallint END
$$;

CREATE TABLE cluster_node_usage_hourly (
    cluster_id  text COLLATE "C" NOT NULL,
    node        text COLLATE "C" NOT NULL,
    hour        timestamptz      NOT NULL,
    samples     bigint           NOT NULL,
    cpu_sum     numeric          NOT NULL,
    cpu_max     bigint           NOT NULL,
    memory_sum  numeric          NOT NULL,
    memory_max  bigint           NOT NULL,
    PRIMARY KEY (cluster_id, node, hour)
);
CREATE INDEX cluster_node_usage_hourly_hour_idx ON cluster_node_usage_hourly (hour);

-- resource: 'c' CPU (nanocores), 'm' memory (bytes).
CREATE TABLE cluster_node_usage_buckets (
    cluster_id  text COLLATE "C" NOT NULL,
    node        text COLLATE "C" NOT NULL,
    hour        timestamptz      NOT NULL,
    resource    "char"           NOT NULL,
    bucket      smallint         NOT NULL,
    samples     bigint           NOT NULL,
    PRIMARY KEY (cluster_id, node, hour, resource, bucket)
);
CREATE INDEX cluster_node_usage_buckets_hour_idx ON cluster_node_usage_buckets (hour);

-- The history kept so far, rolled up once.
WITH rolled AS (
    SELECT m.cluster_id, n.node, date_trunc('hour', m.observed_at, 'UTC') AS hour,
           m.cpu_usage_nanocores AS cpu, m.memory_usage_bytes AS memory
    FROM cluster_node_metrics m, LATERAL (VALUES (m.node), ('')) n(node)
), hourly AS (
    INSERT INTO cluster_node_usage_hourly (cluster_id, node, hour, samples, cpu_sum, cpu_max, memory_sum, memory_max)
    SELECT cluster_id, node, hour, count(*), sum(cpu), max(cpu), sum(memory), max(memory)
    FROM rolled GROUP BY cluster_id, node, hour
)
INSERT INTO cluster_node_usage_buckets (cluster_id, node, hour, resource, bucket, samples)
SELECT cluster_id, node, hour, r.resource, usage_bucket(r.v), count(*)
FROM rolled, LATERAL (VALUES ('c'::"char", cpu), ('m'::"char", memory)) r(resource, v)
GROUP BY 1, 2, 3, 4, 5;
