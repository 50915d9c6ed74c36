-- Back to one unpartitioned table holding every sample.
DROP FUNCTION cluster_node_usage_phase(text, text, float8);
DROP FUNCTION cluster_node_metrics_ensure_partitions(timestamptz, timestamptz);
DROP FUNCTION cluster_node_metrics_covered_until();
DROP FUNCTION cluster_node_metrics_partitions();
DROP FUNCTION cluster_node_metrics_partition_name(timestamptz);

ALTER TABLE cluster_node_metrics RENAME TO cluster_node_metrics_partitioned;
ALTER INDEX cluster_node_metrics_cluster_id_node_observed_at_key RENAME TO cluster_node_metrics_partitioned_key;
CREATE TABLE cluster_node_metrics (
    cluster_id          text COLLATE "C" NOT NULL,
    node                text COLLATE "C" NOT NULL,
    cpu_usage_nanocores bigint           NOT NULL,
    memory_usage_bytes  bigint           NOT NULL,
    observed_at         timestamptz      NOT NULL,
    window_seconds      double precision NOT NULL DEFAULT 0,
    UNIQUE (cluster_id, node, observed_at)
);
INSERT INTO cluster_node_metrics SELECT * FROM cluster_node_metrics_partitioned;
DROP TABLE cluster_node_metrics_partitioned;
CREATE INDEX cluster_node_metrics_observed_at_idx ON cluster_node_metrics (observed_at);
