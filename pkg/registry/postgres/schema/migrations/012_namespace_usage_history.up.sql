-- Namespace usage history (issue 12): hourly rollups of each namespace's
-- usage samples (namespace_rollup.sql), in the shape of the nodes' (010).
-- A scrape that finds the same PodMetrics again adds nothing:
-- last_observed_at is the newest sample the hour holds.
CREATE TABLE cluster_namespace_usage_hourly (
    cluster_id       text COLLATE "C" NOT NULL,
    namespace        text COLLATE "C" NOT NULL,
    hour             timestamptz      NOT NULL,
    samples          bigint           NOT NULL,
    cpu_sum          numeric          NOT NULL,
    cpu_max          bigint           NOT NULL,
    memory_sum       numeric          NOT NULL,
    memory_max       bigint           NOT NULL,
    cpu_buckets      smallint[]       NOT NULL,
    cpu_counts       bigint[]         NOT NULL,
    memory_buckets   smallint[]       NOT NULL,
    memory_counts    bigint[]         NOT NULL,
    last_observed_at timestamptz      NOT NULL,
    PRIMARY KEY (cluster_id, namespace, hour)
);
CREATE INDEX cluster_namespace_usage_hourly_hour_idx ON cluster_namespace_usage_hourly (hour);
