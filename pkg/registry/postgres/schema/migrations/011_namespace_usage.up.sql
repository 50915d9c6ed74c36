-- Namespace usage next to requests (issue 12): the sum of the namespace's
-- pods' metrics.k8s.io PodMetrics, reported on the ClusterNamespace row by
-- the quiet rule nodes use (namespace_report_usage.sql), NULL while unknown.
ALTER TABLE cluster_namespace
    ADD COLUMN usage_cpu_nanocores bigint,
    ADD COLUMN usage_memory_bytes  bigint,
    ADD COLUMN usage_pods          bigint,
    ADD COLUMN usage_observed_at   timestamptz;
