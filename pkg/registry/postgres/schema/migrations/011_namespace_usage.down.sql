ALTER TABLE cluster_namespace
    DROP COLUMN usage_cpu_nanocores,
    DROP COLUMN usage_memory_bytes,
    DROP COLUMN usage_pods,
    DROP COLUMN usage_observed_at;
